// The boundary between the W4A8 host code (gemm_w4a8.cpp: repacking,
// planning, checks) and its kernels (gemm_w4a8_launch.cu): the kernel
// parameters, the table of tile configurations, and one launch function.
#pragma once

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace qserve::cuda::w4a8 {

// The largest k of the W4 weights: the register-A wgmma tiles and the decode
// kernels multiply unsigned weight bytes (unpack8_u8) into INT32 accumulators,
// a product at most 255 x 128 (g128: the weights biased by 128; per-channel:
// the high nibbles at 16 x, 240 x 128), so k <= 2^31 / 32640 = 65,793;
// rounded down. Uploads above it are refused (gemm_w4a8.cpp).
inline constexpr int kMaxU8AccK = 65536;

struct KernelParams {
  const int8_t* x;          // [m, k] row-major
  const uint4* w;           // [n/128][k/64][8][32] x 16 B compute order
  const uint32_t* level2;   // [ceil(n/128)][groups][8][8] (g128; quant/w4a8_repack.h)
  const __half* s_x;        // [m]
  const __half* a_sum;      // [m] (per-channel)
  const int32_t* x_sum;     // [m] sum_i Xq[t, i] (g128: the decode kernels' biased weights, unbias_acc)
  const float* ch_scale;    // [n16*16]
  const float* ch_szero;    // [n16*16] (per-channel)
  __half* y;                // [m, n]
  int32_t* acc_out;         // [m, n] or null: exact accumulators instead of y
  int* counters;            // [grid_m * grid_n] split-K arrival counters (zero between launches)
  int32_t* partials;        // [splits][m][n] split-K partial sums
  int m, n, k, n16, groups;
  int splits, kt_per_split;
};

struct TileShape {
  int bn;       // output channels per CTA
  int bm;       // tokens per CTA
  int warps_n;  // warps along channels
  int warps_m;  // warps along tokens
  int stages;   // cp.async pipeline depth (64 input channels per stage)
};

inline constexpr int kTileCount = 6;
inline constexpr TileShape kTiles[kTileCount] = {
    {128, 8, 4, 1, 8},    // 0: m <= 8 (decode): one MMA column tile per warp
    {128, 16, 4, 1, 8},   // 1: m <= 16
    {128, 32, 4, 1, 8},   // 2: m <= 32, or m <= 64 with few output tiles
    {128, 64, 2, 2, 8},   // 3: m <= 64, and larger m with few output tiles
    {128, 128, 2, 4, 6},  // 4: 64 x 32 per warp (kept for sweeps)
    {256, 128, 4, 2, 6},  // 5: large m, 64 x 64 per warp
};

// Launches tile `tile` (an index into kTiles) with grid (grid_n, grid_m, splits).
void launch_kernel(int tile, bool g128, const KernelParams& p, dim3 grid, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8
