// Per-row INT8 quantization helpers on the device, shared by the fused row
// kernels (kernels/fused_ops.cu) and the attention split merge that quantizes
// its rows (attention/merge_splits.cu): the same instructions in both, so a
// row quantized by either gives the same bytes (and the CPU's:
// quant::act_quantize_value). Included from .cu files only; everything here is
// internal to the including file (whole-program compilation, no -rdc).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "quant/activation_quant.h"

namespace qserve::cuda {
namespace {

// 8 fp16 values of a 16-byte word <-> floats
__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 v = __half22float2(as_half2(w[k]));
    f[2 * k] = v.x;
    f[2 * k + 1] = v.y;
  }
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint4 u;
  u.x = as_u32(__floats2half2_rn(f[0], f[1]));
  u.y = as_u32(__floats2half2_rn(f[2], f[3]));
  u.z = as_u32(__floats2half2_rn(f[4], f[5]));
  u.w = as_u32(__floats2half2_rn(f[6], f[7]));
  return u;
}

// Running max of |x| over fp16 values as two fp16 bit patterns (sign cleared:
// they order like unsigned integers, exactly; a NaN ranks above infinity);
// halves_max gives the pattern of the larger half.
__device__ __forceinline__ uint32_t absmax_bits(uint32_t m2, const uint4& r) {
  m2 = __vmaxu2(m2, __vmaxu2(r.x & 0x7fff7fffu, r.y & 0x7fff7fffu));
  return __vmaxu2(m2, __vmaxu2(r.z & 0x7fff7fffu, r.w & 0x7fff7fffu));
}
__device__ __forceinline__ uint32_t halves_max(uint32_t m2) { return max(m2 & 0xffffu, m2 >> 16); }

// Per-row INT8 quantization without a division per element, bit-exact with
// act_quantize_value (IEEE y / s, round half to even, clamp):
//  - the code comes from fma(y, 1/s, 1.5 * 2^23): the float adder rounds the
//    product to the nearest integer, which lands in the low mantissa bits (the
//    code's byte is the low byte of the bit pattern; the pattern minus
//    0x4B400000 is the code), no conversion instruction;
//  - y (1/s) is within 2^-17 of y / s (|y / s| <= 127.07), and the IEEE
//    quotient within 2^-18 of y / s: where the product lies more than 2^-14
//    from a rounding tie both round alike. Within 2^-14 of a tie (about 1 code
//    in 8,000 on random data, and exact ties such as y = 1.5 s) the chunk is
//    recomputed with act_quantize_value;
//  - no clamp on the fast path: a normal fp16 scale is amax / 127 within
//    2^-11, so |y / s| < 127.07 rounds to at most 127. Rows whose scale is 0,
//    subnormal or not finite take act_quantize_value for every element.
struct RowQuant {
  float s, inv_s;
  bool fast;
};
__device__ __forceinline__ RowQuant row_quant(float s) {
  // normal fp16 scales only (2^-14 .. 65504)
  const bool fast = s >= 6.103515625e-05f && s <= 65504.f;
  return {s, fast ? 1.f / s : 0.f, fast};
}
constexpr uint32_t kRoundMagicBits = 0x4B400000u;  // 1.5 * 2^23
__device__ __forceinline__ uint32_t pack_low_bytes(uint32_t b0, uint32_t b1, uint32_t b2, uint32_t b3) {
  return __byte_perm(__byte_perm(b0, b1, 0x0040), __byte_perm(b2, b3, 0x0040), 0x5410);
}
struct ExactChunk {
  uint2 packed;
  int sum;
};
// The rare path, out of line (keeps the unrolled hot loops small): eight
// codes by act_quantize_value.
__device__ __noinline__ ExactChunk quantize8_exact(float4 lo, float4 hi, float s) {
  const float y[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint32_t b[8];
  int sum = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int v = act_quantize_value(y[k], s);
    sum += v;
    b[k] = static_cast<uint32_t>(v);
  }
  return {make_uint2(pack_low_bytes(b[0], b[1], b[2], b[3]), pack_low_bytes(b[4], b[5], b[6], b[7])), sum};
}
// Eight values -> eight INT8 codes (packed, element k in byte k % 4 of word
// k / 4); `acc` accumulates the codes' bit patterns (wrapping; quant_sum
// below subtracts kRoundMagicBits per code).
__device__ __forceinline__ uint2 quantize8(const float (&y)[8], const RowQuant& rq, uint32_t& acc) {
  uint32_t b[8];
  bool near_tie = !rq.fast;
  if (rq.fast) {
    const float magic = __uint_as_float(kRoundMagicBits);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float r = __fmaf_rn(y[k], rq.inv_s, magic);
      b[k] = __float_as_uint(r);
      const float frac = __fmaf_rn(y[k], rq.inv_s, -__fsub_rn(r, magic));  // |frac| <= 0.5
      near_tie |= fabsf(frac) > 0.5f - 1.f / 16384.f;
    }
  }
  if (near_tie) {  // rare: exact IEEE division for this chunk
    const ExactChunk e = quantize8_exact(make_float4(y[0], y[1], y[2], y[3]), make_float4(y[4], y[5], y[6], y[7]), rq.s);
    acc += static_cast<uint32_t>(e.sum) + 8u * kRoundMagicBits;
    return e.packed;
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) acc += b[k];
  return make_uint2(pack_low_bytes(b[0], b[1], b[2], b[3]), pack_low_bytes(b[4], b[5], b[6], b[7]));
}
// The sum of `codes` codes whose bit patterns added up to `acc`.
__device__ __forceinline__ int quant_sum(uint32_t acc, int codes) {
  return static_cast<int>(acc - static_cast<uint32_t>(codes) * kRoundMagicBits);
}

}  // namespace
}  // namespace qserve::cuda
