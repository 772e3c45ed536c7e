// The boundary between the W4A16 host code (gemm_w4a16.cpp) and its kernels
// (gemm_w4a16_launch.cu, kernels/gemm_w4a16_kernel.cuh).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace qserve::cuda::w4a16 {

struct StreamParams {
  const __half* x;       // [m, k] row-major
  const uint4* w;        // [n16][kt_total][32 lanes] (16 B each)
  const uint2* params;   // [n16][groups][8]: half2 scales, half2 1024 + zeros of rows g, g + 8
  __half* y;             // [m, n]
  int m, n, k, n16, kt_total, groups;
  int group_shift;       // log2(k tiles of 64 per group)
};

// The streaming kernel with tile `tile` of kW4A16StreamTiles (gemm_w4a16.h);
// false for an unknown tile.
bool launch_stream(int tile, const StreamParams& p, cudaStream_t stream);
// Row tiles [row16_0, row16_0 + rows16) dequantized to fp16 [rows16 * 16][k] at `out`.
void launch_dequant(const StreamParams& p, int row16_0, int rows16, __half* out, cudaStream_t stream);

}  // namespace qserve::cuda::w4a16
