// The compute order of the CUDA W4A16 kernels (backend/cuda/gemm_w4a16.h):
// fp16 mma.sync m16n8k16 with the weights as the A operand (16 output
// channels), dequantized in registers from one 128-bit load per lane per
// 16 x 64 tile.
//
// Within a 64-wide k tile the reduction order is permuted (any permutation
// applied to both operands leaves the sum unchanged) so that lane (g, t)
// (g = lane / 4, t = lane % 4) of k16 step j holds logical columns
// {2t, 2t+1, 2t+8, 2t+9} = physical k {16t+4j, +1, +2, +3}: its activation
// fragments for the whole tile are X[token][16t .. 16t+15], 32 contiguous
// bytes (two 16-B loads), and its weights one 32-bit word per step:
//   word j, nibble 0 / 4: row g,     k 16t+4j+0 / +1   (A regs a0: half2)
//           nibble 1 / 5: row g + 8, k 16t+4j+0 / +1   (a1)
//           nibble 2 / 6: row g,     k 16t+4j+2 / +3   (a2)
//           nibble 3 / 7: row g + 8, k 16t+4j+2 / +3   (a3)
// so that (word >> 4s) & 0x000f000f puts the nibble pair of register a_s in
// the two half lanes (the 0x6400 exponent trick: half(0x6400 | q) = 1024 + q).
//
// Weights: [n16][k/64][32 lanes][4 words] (16 B per lane; a warp streams one
// 16-channel row tile's k tiles contiguously). Rows past n are zero.
// Group parameters: [n16][groups][8 (g)] x uint2:
//   .x = half2(s[row g], s[row g + 8]), .y = half2(1024 + z[row g], 1024 + z[row g + 8])
// dequantized weight = (half(0x6400 | q) - (1024 + z)) * s: the subtraction
// is exact (integers below 2048), one rounding in the multiply.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/weight_format.h"

namespace qserve::quant {

// Physical k inside a 64-wide tile of lane-quad t, k16 step j, pair slot p (0..3).
inline int w4a16_physical_k(int t, int j, int p) { return 16 * t + 4 * j + p; }

// qweight [n, k/2] canonical -> [n16][k/64][32][16] bytes; k % 64 == 0.
std::vector<uint8_t> repack_w4a16(const W4A16Weights& w);
// The inverse (tests): the W4 value of (o, i) read back from the repacked layout.
uint8_t repacked_w4a16_at(const std::vector<uint8_t>& packed, int64_t k, int64_t o, int64_t i);
// scale / zero [n, groups] -> [n16][groups][8] x (uint32 half2 s, uint32 half2 1024 + z).
std::vector<uint32_t> repack_w4a16_params(const W4A16Weights& w);

}  // namespace qserve::quant
