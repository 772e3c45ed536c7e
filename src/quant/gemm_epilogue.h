// The FP32 epilogues of the quantized GEMMs, shared by the CPU reference and the
// CUDA kernels so that both evaluate the same expression in the same order
// (the result is then rounded to fp16 once). acc is the exact INT32 accumulator.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace qserve::quant {

// Multiply / subtract without contraction into an FMA, so that host and device
// round identically (the device compiler contracts a * b - c by default).
QS_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
QS_HOST_DEVICE float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// g128: Y = s_x[t] * s1[o] * acc,  acc = sum_i Xq[t, i] * W8hat[o, i].
QS_HOST_DEVICE float epilogue_g128(int32_t acc, float s_x, float s1) {
  return mul_rn(mul_rn(s_x, s1), static_cast<float>(acc));
}

// per-channel: Y = s_x[t] * s[o] * acc - (s[o] * z[o]) * a_sum[t],
// acc = sum_i Xq[t, i] * W4[o, i] (raw UINT4, zero point folded out).
QS_HOST_DEVICE float epilogue_per_channel(int32_t acc, float s_x, float s, float sz, float a_sum) {
  return sub_rn(mul_rn(mul_rn(s_x, s), static_cast<float>(acc)), mul_rn(sz, a_sum));
}
// sz = s * z, computed once per channel.
QS_HOST_DEVICE float scaled_zero_point(float s, uint8_t z) { return mul_rn(s, static_cast<float>(z)); }

// W8A8 (per-channel weight scale): Y = s_x[t] * s_w[o] * acc.
QS_HOST_DEVICE float epilogue_w8a8(int32_t acc, float s_x, float s_w) {
  return mul_rn(mul_rn(s_x, s_w), static_cast<float>(acc));
}

}  // namespace qserve::quant
