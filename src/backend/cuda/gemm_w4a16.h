// W4A16 (weight-only, g128, AWQ-style: w = (q - z) * s per group) on the GPU,
// with the weights kept at 4 bits in device memory:
//  - m <= 64 (decode): a weight-streaming kernel on fp16 tensor cores
//    (mma.sync m16n8k16, f32 accumulation): each warp streams one 16-channel
//    row tile's k range straight from global memory into registers, one
//    128-bit load per lane per 16 x 64 tile (quant/w4a16_repack.h), dequantizes
//    in registers (2 x 0x6400-trick extraction, HSUB2, HMUL2 per 4 weights),
//    and the CTA's warps, which split k, sum their partial tiles through
//    shared memory before the fp16 store;
//  - larger m: the weights are dequantized into an fp16 scratch, a slice of
//    rows at a time, each slice multiplied by cuBLAS (FP16 tensor cores, f32
//    accumulation). At m >= 1024 the extra pass is a few percent of the GEMM.
// Results equal the CPU reference (backend/cpu/gemm_w4a8.h: gemm_w4a16, fp32
// over the dequantized weights) within fp16 rounding of the weights and the
// output (tests/ops/test_gemm_w4a16.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backend/cuda/device_memory.h"
#include "quant/weight_format.h"

namespace qserve::cuda {

struct W4A16DeviceWeights {
  int64_t n = 0, k = 0, n16 = 0, groups = 0, group = 0;
  DeviceBuffer qweight;  // [n16][k/64][32][16] bytes (quant::repack_w4a16)
  DeviceBuffer params;   // [n16][groups][8] x uint2 (quant::repack_w4a16_params)
  size_t weight_bytes() const { return qweight.size() + params.size(); }
};

// Whether the kernels take this shape: k and group multiples of 64, group / 64 a power of two.
bool w4a16_layout_supported(int64_t k, int64_t group);
// Repack (host) and upload; fails (kUnsupported) unless w4a16_layout_supported.
W4A16DeviceWeights upload_w4a16(const quant::W4A16Weights& w);

// The streaming kernel's shapes: MT row tiles of 16 channels per warp, NT
// column tiles of 8 tokens, WK warps per CTA splitting k, U k tiles per load batch.
struct W4A16StreamTile {
  int mt, nt, wk, u;
};
inline constexpr int kW4A16StreamTileCount = 5;
inline constexpr W4A16StreamTile kW4A16StreamTiles[kW4A16StreamTileCount] = {
    {1, 1, 8, 4},   // 0: the planner's at m <= 8 (layers under 16384 rows)
    {2, 1, 8, 4},   // 1: the planner's at m <= 8 (wider layers)
    {1, 2, 8, 2},   // 2: sweeps only
    {2, 2, 8, 2},   // 3: the planner's from m = 9 to kW4A16StreamMaxM
    {4, 2, 8, 2},   // 4: sweeps only
};
inline constexpr int64_t kW4A16StreamMaxM = 64;
// The streaming tile the planner picks for (m, n); -1 when m > kW4A16StreamMaxM.
int w4a16_stream_tile(int64_t m, int64_t n);

// Rows of the fp16 scratch the large-m path dequantizes at a time, for a
// scratch of `scratch_bytes` (a multiple of 16 rows, at least 16).
int64_t w4a16_slice_rows(int64_t n, int64_t k, size_t scratch_bytes);
inline constexpr size_t kW4A16ScratchBytes = size_t{64} << 20;

// Y[m, n] fp16 = X[m, k] fp16 * W^T. stream_tile >= 0 forces the streaming
// kernel with that tile (tests, benchmarks; any m), -1 picks: the
// streaming kernel up to kW4A16StreamMaxM, else dequantize + cuBLAS through
// `scratch` (kW4A16ScratchBytes, or any size holding 16 rows of k).
void gemm_w4a16(const W4A16DeviceWeights& w, const __half* x, int64_t m, __half* y, void* scratch,
                size_t scratch_bytes, cublasHandle_t cublas, cudaStream_t stream, int stream_tile = -1);
// The large-m path regardless of m (tests, benchmarks).
void gemm_w4a16_dequant_cublas(const W4A16DeviceWeights& w, const __half* x, int64_t m, __half* y, void* scratch,
                               size_t scratch_bytes, cublasHandle_t cublas, cudaStream_t stream);

}  // namespace qserve::cuda
