// Decode attention over the paged KV cache (docs/kv-cache-layout.md): one new
// token per sequence, GQA (the 1..8 query heads of a KV head are served by
// one thread block, so each KV byte is read once), head_dim 64 or 128, KV4 /
// KV8 / FP16 pages, FP16 math. When batch x KV heads cannot fill the GPU the
// context is split across blocks (flash-decoding) and merged exactly.
//
// Plan once per step (host, no device calls), run once per layer:
//   DecodePlan plan = plan_decode_attention(shape, dtype, batch, max_context, num_sms);
//   decode_attention(..., plan, workspace /* plan.workspace_bytes */, stream);
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/fused_ops.h"        // Int8Rows
#include "backend/cpu/paged_attention.h"  // AttentionShape
#include "quant/kv_format.h"

namespace qserve::cuda {

// Which decode kernel serves a launch (kAuto: chosen by the GQA group and
// the KV format, see decode_attention.cu; the others are for tests and benches).
enum class DecodeKernel : int32_t {
  kAuto = 0,
  kMma,      // tensor cores, keys in M (decode_mma_kernel.cuh), groups 1..8
  kSimt,     // CUDA cores (decode_simt_kernel.cuh), groups 1..2 (else kMma)
  kMmaRows,  // tensor cores, heads in M (paged_attention_kernel.cuh), groups 3..8 (else kMma)
};

// "auto", "mma", "simt", "mma-rows": the names tests, benches and results use.
inline const char* decode_kernel_name(DecodeKernel k) {
  switch (k) {
    case DecodeKernel::kMma: return "mma";
    case DecodeKernel::kSimt: return "simt";
    case DecodeKernel::kMmaRows: return "mma-rows";
    default: return "auto";
  }
}

struct DecodePlan {
  int32_t num_splits = 1;    // blocks per (sequence, KV head)
  int32_t split_tokens = 0;  // tokens per split, a multiple of the chunk size
  size_t workspace_bytes = 0;
  DecodeKernel kernel = DecodeKernel::kAuto;
  // kMma under programmatic launch: stage the first keys of each warp before
  // waiting for the previous kernel (see decode_attention below); false for
  // comparisons.
  bool stage_before_wait = true;
  // kMma, groups <= 4: a persistent grid of at most the resident blocks
  // (num_sms x blocks per SM), each serving several (sequence, KV head, split)
  // units in turn, the next unit's first keys staged while the current one
  // finishes; false: one block per unit (waves).
  bool persistent = false;
  // kMma, KV4 / KV8: value codes enter the tensor cores as fp16 subnormals
  // (t 2^-24: one mask per two codes, no subtraction), the output rescaled
  // once; false: 1024 + t with 1024 subtracted per two codes (comparisons).
  bool subnormal_values = true;
  // kMma, KV4, head_dim 128, pages of a multiple of 32 tokens, sm_90: each
  // warp-chunk staged by one lane with TMA on an mbarrier (decode_mma_kernel.cuh,
  // kTma) instead of cp.async from every lane. plan_decode_attention sets it
  // where the units are long (split_tokens >= 3072) and fit in one wave of
  // resident blocks, where it measured faster; the other formats and page
  // sizes always take cp.async.
  bool tma = false;
  // kMma, cp.async staging, the default value path of the format, not
  // persistent: warps per (sequence, KV head, split) unit, 4 (one unit per
  // block), 2 or 1 (the block's 4 warps serve 2 or 4 units side by side).
  // plan_decode_attention takes 2 or 1 where that makes fewer waves of
  // resident blocks (more units than blocks fit at once); other plans ignore it.
  int32_t unit_warps = 4;
  int32_t num_sms = 0;  // from plan_decode_attention
};

// num_sms: the device's multiprocessor count (cudaDevAttrMultiProcessorCount).
// max_context: the largest context length in the batch (an upper bound is fine).
// force_splits > 0 overrides the heuristic (tests).
DecodePlan plan_decode_attention(const AttentionShape& shape, KvDtype dtype, int batch, int max_context, int num_sms,
                                 int force_splits = 0);

// Resident blocks per SM of the keys-in-M decode kernel for this format
// (an occupancy query, cached; 0 for an unsupported head_dim).
int decode_blocks_per_sm(KvDtype dtype, int head_dim);

// DecodePlan::unit_warps for `units` units of split_tokens keys on `slots`
// resident blocks: of 4, 2 and 1 warps per unit the fewest waves of blocks,
// ties to more warps, each warp streaming at most max_warp_tokens keys
// (plan_decode_attention's rule, with its cap; benches pass their own).
int decode_unit_warps(int64_t units, int64_t slots, int split_tokens, int max_warp_tokens);

struct DecodeArgs {
  const uint16_t* q = nullptr;             // [batch, Hq, D] fp16 (after RoPE)
  uint16_t* out = nullptr;                 // [batch, Hq, D] fp16
  const int32_t* context_lens = nullptr;   // [batch] tokens in the cache, the new one included
  const int32_t* page_table = nullptr;     // [batch, page_table_stride]
  int32_t page_table_stride = 0;
  int32_t batch = 0;
  float softmax_scale = 0.f;
  // When quant.q is set, each token's output row (Hq * D values) is also
  // quantized per token into it, with the bytes of quantize_int8(out)
  // (kernels/fused_ops.h: o_proj's input); out must then be 16-byte aligned.
  // With splits the merge and the quantization are one kernel (merge_splits.h).
  Int8Rows quant{};
};

// Returns cudaErrorInvalidValue for an unsupported shape (head_dim other than
// 64 / 128, group above 8) and the launch status otherwise. No allocation,
// no synchronization: safe to capture in a CUDA graph.
// Under programmatic dependent launch (launch_pdl.h) the kernel may read
// context_lens, page_table and the keys and values of positions below
// context_len - 1 while the previous kernel of the stream still runs: that
// kernel may write q (RoPE) and the new token's position context_len - 1
// (rope_kv_write), not those.
cudaError_t decode_attention(const DecodeArgs& args, const AttentionShape& shape, const PagedKvCache& cache,
                             const DecodePlan& plan, void* workspace, cudaStream_t stream);

}  // namespace qserve::cuda
