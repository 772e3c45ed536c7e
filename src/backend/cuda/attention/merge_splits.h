// The exact merge of flash-decoding splits (decode_attention.cu launches it
// after the decode kernel when the context was split across blocks), and the
// same merge with the per-token INT8 quantization of o_proj's input fused in.
//
// Partial states, written by the decode kernel for each (sequence b, query
// head h) row r = b * Hq + h and split s:
//   part_o  [rows][splits][D] f32: the split's unnormalized output,
//   part_ml [rows][splits][2] f32: its running max m (log2 domain) and sum l.
// out[r] = fp16(sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s), M the max of
// the m_s of splits with l_s > 0 (splits without keys are skipped).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cpu/fused_ops.h"  // Int8Rows

namespace qserve::cuda {

struct SplitPartials {
  const float* part_o = nullptr;   // [batch * Hq][splits][D]
  const float* part_ml = nullptr;  // [batch * Hq][splits][2]
  int32_t batch = 0, num_q_heads = 0, head_dim = 0, num_splits = 0;
};

// out: [batch, Hq * D] fp16.
cudaError_t merge_splits(const SplitPartials& p, uint16_t* out, cudaStream_t stream);

// merge_splits, then each token's row of Hq * D values quantized per token
// into `quant` (INT8 codes, fp16 scale, fp16 activation sum when quant.sum),
// with the same bytes as quantize_int8(out) after merge_splits: one launch
// instead of two. A thread block cluster per token (the heads shared among
// up to 8 blocks, the row's absmax and code sum reduced through distributed
// shared memory). Returns cudaErrorNotSupported where clusters are not (below
// sm_90) or for a head count it does not split (the caller then launches the
// two kernels), cudaErrorInvalidValue for a bad shape.
cudaError_t merge_splits_quantize(const SplitPartials& p, uint16_t* out, const Int8Rows& quant, cudaStream_t stream);

}  // namespace qserve::cuda
