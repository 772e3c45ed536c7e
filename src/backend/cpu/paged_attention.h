// CPU reference for the attention half of a decoder block over the paged KV
// cache (docs/kv-cache-layout.md): RoPE + KV quantization + paged write of
// new tokens, then causal attention of the new tokens over everything the
// cache holds for their sequence (decode = one new token per sequence;
// prefill = many, including chunked prefill and reused prefixes).
// Scalar float code; the CUDA kernels are tested against it. The batch
// structs here are shared with the CUDA launchers (pointers are host memory
// for the CPU backend, device memory for CUDA).
#pragma once

#include <cstdint>

#include "backend/cpu/rope.h"
#include "quant/kv_format.h"

namespace qserve {

struct AttentionShape {
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;  // num_q_heads % num_kv_heads == 0 (GQA group = ratio, 1..8)
  int32_t head_dim = 0;      // 64 or 128
};

// The new tokens of one step, for RoPE + KV write.
struct KvWriteBatch {
  int32_t num_tokens = 0;
  const int32_t* positions = nullptr;     // [num_tokens] absolute position of each token
  const int32_t* slot_mapping = nullptr;  // [num_tokens] physical page * page_size + slot; < 0: not written
};

// The q, k, v projections of the new tokens: rows of fp16 with a row stride
// in elements, so that one fused qkv GEMM output [T, (Hq + 2 Hkv) * D] is
// q = qkv, k = qkv + Hq * D, v = qkv + (Hq + Hkv) * D, all with stride
// (Hq + 2 Hkv) * D; separate tensors work too.
struct QkvInput {
  const uint16_t* q = nullptr;  // [T, Hq * D] (row stride q_stride)
  const uint16_t* k = nullptr;  // [T, Hkv * D] (row stride k_stride)
  const uint16_t* v = nullptr;  // [T, Hkv * D] (row stride v_stride)
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  const uint16_t* q_bias = nullptr;  // [Hq * D] fp16, or null
  const uint16_t* k_bias = nullptr;  // [Hkv * D]
  const uint16_t* v_bias = nullptr;  // [Hkv * D]
};

// Applies bias + RoPE to q and k of every new token, writes q to q_out, and
// quantizes k and v into their slots of the cache.
//   rope_table: [max_position + 1, D / 2, 2] f32 (build_rope_table)
//   q_out:      [T, Hq, D] fp16 (may be in.q itself when q_stride == Hq * D)
// Per element: x = fp16 value + fp16 bias in f32, rotated in f32, rounded to
// fp16 (q_out; and the k/v value that is quantized).
void rope_kv_write_cpu(const QkvInput& in, const KvWriteBatch& batch, const AttentionShape& shape, RopeStyle style,
                       const float* rope_table, uint16_t* q_out, const PagedKvCache& cache);

// The sequences of one attention call. Sequence b has num_new[b] =
// q_starts[b + 1] - q_starts[b] new tokens, which are the last positions
// [context_lens[b] - num_new[b], context_lens[b]) of its context; they are
// already in the cache. Its logical page j is physical page
// page_table[b * page_table_stride + j].
struct PagedAttentionBatch {
  int32_t batch = 0;
  const int32_t* q_starts = nullptr;      // [batch + 1] prefix sums of new tokens (decode: 0, 1, ..., batch)
  const int32_t* context_lens = nullptr;  // [batch]
  const int32_t* page_table = nullptr;    // [batch, page_table_stride]
  int32_t page_table_stride = 0;
};

// out[t, h, :] = softmax(scale * q[t, h] . K[0..pos_t]) V, causal, GQA
// (query head h reads KV head h / (Hq / Hkv)), K and V dequantized from the
// cache, math in f32, output rounded to fp16.
//   q, out: [total_new_tokens, Hq, D] fp16
void paged_attention_cpu(const uint16_t* q, const AttentionShape& shape, const PagedKvCache& cache,
                         const PagedAttentionBatch& batch, float softmax_scale, uint16_t* out);

}  // namespace qserve
