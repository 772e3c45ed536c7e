// INT4 -> INT8 unpacking (+ g128 level-2 dequantization) of one 32-bit word
// of the repacked compute order (quant/w4a8_repack.h), shared by the wgmma
// consumers, the producer-dequantizing tiles, the dequantization pass, the
// decode kernels and the sm_80 mma.sync kernel.
#pragma once

#include <cstdint>

#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8::wgmma {

// Level-2 parameters of rows g and g + 8 for one group, in the form the
// unpacking below uses: s2 and C (quant/w4a8_repack.h). The stored entry has
// s2 | zs2 << 8 per row (rows g, g + 8 in the low, high half): each byte
// taken by one byte permute, C by one multiply-add.
struct Level2 {
  uint32_t s2_lo, c_lo, s2_hi, c_hi;
};
__device__ __forceinline__ Level2 level2_params(uint32_t e) {
  Level2 l;
  l.s2_lo = __byte_perm(e, 0u, 0x4440);
  l.c_lo = quant::level2_offset_constant(__byte_perm(e, 0u, 0x4441));
  l.s2_hi = __byte_perm(e, 0u, 0x4442);
  l.c_hi = quant::level2_offset_constant(e >> 24);
  return l;
}

// INT4 x 8 (one word of the compute order) -> two registers of 4 INT8 each
// (rows g and g + 8). g128: a 32-bit multiply-add with no carry between bytes
// per 4 weights (quant::level2_dequant_biased4, exact under the protective
// range), then, unless kBiased, an XOR to two's complement. kBiased leaves
// the weights + 128 as unsigned bytes for a u8 x s8 MMA, whose accumulators
// then hold 128 * sum_i Xq[t, i] too (unbias_acc removes it).
template <bool kG128, bool kBiased = false>
__device__ __forceinline__ void unpack8(uint32_t word, const Level2& l, uint32_t& lo, uint32_t& hi) {
  lo = word & 0x0f0f0f0fu;
  hi = (word >> 4) & 0x0f0f0f0fu;
  if constexpr (kG128 && kBiased) {
    lo = quant::level2_dequant_biased4(lo, l.s2_lo, l.c_lo);
    hi = quant::level2_dequant_biased4(hi, l.s2_hi, l.c_hi);
  } else if constexpr (kG128) {
    lo = quant::level2_dequant_offset4(lo, l.s2_lo, l.c_lo);
    hi = quant::level2_dequant_offset4(hi, l.s2_hi, l.c_hi);
  }
}

// Per-channel INT4 x 8 -> two registers of 4 unsigned bytes for the u8 x s8
// wgmmas and the decode kernels' u8 x s8 mma.sync, one instruction each: lo =
// the low nibbles (rows g), hi = the high nibbles masked in place (rows g +
// 8), i.e. 16 x those weights (0..240). The rows g + 8 accumulate 16 x their
// dot products, divided out after the main loop (exact: a multiple of 16):
// pc_rows8_exact in the wgmma tiles, the epilogue's sum in the decode kernels.
// unpack8<false> spends a shift more on the high nibbles.
__device__ __forceinline__ void unpack8_pc16(uint32_t word, uint32_t& lo, uint32_t& hi) {
  lo = word & 0x0f0f0f0fu;
  hi = word & 0xf0f0f0f0u;
}

// The unsigned weight bytes of either kind for the u8 x s8 MMAs (the wgmma
// tiles' load_stage, the decode kernels): g128 biased by 128 (unpack8),
// per-channel the rows g + 8 at 16 x (unpack8_pc16; l unused).
template <bool kG128>
__device__ __forceinline__ void unpack8_u8(uint32_t word, const Level2& l, uint32_t& lo, uint32_t& hi) {
  if constexpr (kG128)
    unpack8<true, true>(word, l, lo, hi);
  else
    unpack8_pc16(word, lo, hi);
}

// The wgmma m64nNk32 accumulators of one m-tile after unpack8_pc16 weights:
// acc[4 q + 0 / 1] hold row g of columns 8 q + 2 (lane % 4) + 0 / 1, acc[4 q +
// 2 / 3] row g + 8 at 16 x its value; made exact by an arithmetic shift.
template <int N>
__device__ __forceinline__ void pc_rows8_exact(int32_t (&acc)[N]) {
#pragma unroll
  for (int q = 0; q < N / 4; ++q) acc[4 * q + 2] >>= 4, acc[4 * q + 3] >>= 4;
}

// The exact INT32 accumulator of the signed weights from that of the biased
// ones: acc - 128 * x_sum (x_sum = sum_i Xq[t, i] of the output's token).
__device__ __forceinline__ int32_t unbias_acc(int32_t acc, int32_t x_sum) { return acc - quant::kLevel2Bias * x_sum; }

}  // namespace qserve::cuda::w4a8::wgmma
