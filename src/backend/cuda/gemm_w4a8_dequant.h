// The W4 dequantization pass of the INT8-weight GEMM path (docs/gemm-hopper.md):
// repacked W4 weights (quant/w4a8_repack.h) -> INT8 [n, k] row-major, the
// values the wgmma kernels' consumers would compute in registers:
//  - g128: the level-2 result (q - z) s2, exact INT8 in [-119, 119];
//  - per-channel: the raw UINT4 0..15 (the zero point stays in the epilogue).
// Memory-bound (reads n k / 2 bytes, writes n k); the GEMM that follows reads
// the copy through TMA. No fmt / core/error.h here (nvcc host pass).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace qserve::cuda {

// qweight: [ceil(n/128)][k/64][8][32][16 B]; level2: [ceil(n/128)][groups][8][8] (g128
// only); out: [n, k] int8, 16-B aligned. k % 64 == 0.
void launch_w4_dequant(const uint8_t* qweight, const uint32_t* level2, int64_t n, int64_t k, int64_t n16,
                       int64_t groups, bool g128, int8_t* out, cudaStream_t stream);

}  // namespace qserve::cuda
