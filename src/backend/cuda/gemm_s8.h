// W8A8 GEMM on the sm_90a INT8-weight wgmma tiles (docs/gemm-hopper.md):
// Y[m, n] fp16 = s_x[t] * s_w[o] * sum_i X[t, i] W[o, i] (quant::epilogue_w8a8)
// with the epilogue fused, instead of cuBLASLt's INT32 output and a separate
// epilogue kernel. The same kernels run the W4 layers after the
// dequantization pass (gemm_w4a8.h, tiles kW4A8FirstS8Tile..).
#pragma once

#include <cstdint>

#include "backend/cuda/gemm_w4a8.h"

namespace qserve::cuda {

// Whether the INT8-weight kernels take this problem: sm_90, k % 64 == 0
// (TMA rows of 16-B multiples; the pipeline's 64-wide k granule).
bool s8_wgmma_supported(const DeviceInfo& dev, int64_t k);

// Whether the W8A8 layer runs this problem on the INT8-weight kernels rather
// than cuBLASLt INT8 + the separate epilogue (measured: gemm_s8.cpp).
bool use_s8_w8a8(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k);

// A plan on one of the INT8-weight tiles (force_tile: one of them or -1 for
// the cost model's pick; force_splits as in plan_w4a8). No weight scratch.
W4A8Plan plan_s8(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile = -1, int force_splits = 0);

// w: [n, k] int8 row-major (16-B aligned); s_w: [n] f32; args as for
// gemm_w4a8 (a_sum unused; acc_out: the exact INT32 accumulators instead).
// `workspace`: plan.workspace_bytes, zeroed before its first use.
void gemm_s8_w8a8(const int8_t* w, const float* s_w, int64_t n, int64_t k, const W4A8Args& args, const W4A8Plan& plan,
                  void* workspace, cudaStream_t stream);

// The dequantization pass alone (benchmarks, tests): the W4 weights as INT8
// [n, k] (g128: level-2 values; per-channel: raw UINT4).
void dequantize_w4a8(const W4A8DeviceWeights& w, int8_t* out, cudaStream_t stream);

}  // namespace qserve::cuda
