// RoPE + KV quantization + paged write of the new tokens of a step (prefill
// chunks and decode tokens alike): the CUDA twin of rope_kv_write_cpu, whose
// pages it reproduces byte for byte (same rope table, same per-element
// arithmetic from quant/kv_format.h).
#pragma once

#include <cuda_runtime_api.h>

#include "backend/cpu/paged_attention.h"  // QkvInput, KvWriteBatch, AttentionShape
#include "backend/cpu/rope.h"
#include "quant/kv_format.h"

namespace qserve::cuda {

// All pointers are device memory. rope_table: [max_position + 1, D / 2, 2] f32
// (build_rope_table, uploaded once). q_out: [T, Hq, D] fp16 (may alias in.q
// when in.q_stride == Hq * D). Returns cudaErrorInvalidValue for head_dim
// other than 64 / 128. Launched with programmatic dependent launch
// (launch_pdl.h): waits for the previous kernel before any global access, then
// lets the next kernel start (decode attention stages old keys meanwhile).
cudaError_t rope_kv_write(const QkvInput& in, const KvWriteBatch& batch, const AttentionShape& shape, RopeStyle style,
                          const float* rope_table, uint16_t* q_out, const PagedKvCache& cache, cudaStream_t stream);

}  // namespace qserve::cuda
