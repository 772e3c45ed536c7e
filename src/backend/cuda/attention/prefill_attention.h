// Prefill attention over the paged KV cache: the new tokens of each sequence
// (a whole prompt, a chunk of one, or the suffix after a reused prefix)
// attend causally to every key of their sequence up to their own position,
// all read from the cache (the new tokens' keys and values are written
// first, by rope_kv_write). FP16 tensor cores (wgmma on sm_90a, mma.sync
// elsewhere), flash-attention style online softmax, variable lengths in one
// launch, KV4 / KV8 / FP16 pages, head_dim 64 / 128, GQA group 1..8.
//
// Kernels: kFlash (the default, prefill_flash_kernel.cuh: K/V tiles
// dequantized once per block into fp16 shared memory, 128 query rows per
// block), and for comparison kFlashSyncPv (the same with P V on mma.sync) and
// kPaged (the earlier kernel shared with decode, paged_attention_kernel.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cpu/paged_attention.h"  // AttentionShape
#include "quant/kv_format.h"

namespace qserve::cuda {

// kFlash: P V on wgmma too where built for sm_90a; kFlashSyncPv: P V on
// mma.sync (comparison); kPaged: the earlier kernel (comparison).
enum class PrefillKernel : int32_t { kFlash = 0, kPaged = 1, kFlashSyncPv = 2 };

struct PrefillArgs {
  const uint16_t* q = nullptr;             // [T, Hq, D] fp16 (after RoPE), sequences concatenated
  uint16_t* out = nullptr;                 // [T, Hq, D] fp16
  const int32_t* q_starts = nullptr;       // [batch + 1] device: new tokens of sequence b are rows [q_starts[b], q_starts[b+1])
  const int32_t* context_lens = nullptr;   // [batch] device: tokens in the cache, the new ones included
  const int32_t* page_table = nullptr;     // [batch, page_table_stride] device
  int32_t page_table_stride = 0;
  int32_t batch = 0;
  int32_t max_new_tokens = 0;  // host: the largest q_starts[b + 1] - q_starts[b] (sizes the grid)
  float softmax_scale = 0.f;
  PrefillKernel kernel = PrefillKernel::kFlash;
};

// No allocation, no synchronization. cudaErrorInvalidValue for an
// unsupported shape; the launch status otherwise.
cudaError_t prefill_attention(const PrefillArgs& args, const AttentionShape& shape, const PagedKvCache& cache,
                              cudaStream_t stream);

}  // namespace qserve::cuda
