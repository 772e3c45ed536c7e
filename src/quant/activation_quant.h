// Per-token symmetric INT8 activation quantization (qoq-spec.md section 2):
//   s_x[t] = max_i |X[t, i]| / 127 (stored fp16),
//   Xq[t, i] = clamp(round_half_even(X[t, i] / s_x[t]), -127, 127),
//   a_sum[t] = s_x[t] * sum_i Xq[t, i] (fp16, for per-channel W4 layers).
// A row of zeros (or one whose scale underflows fp16) gets s_x = 0 and Xq = 0.
// The per-element arithmetic, __host__ __device__, for the GPU producers; it
// matches quant::quantize_activation_row (quant/weight_format.h), the host
// reference, so that CPU and GPU agree exactly on the same float inputs.
#pragma once

#include <cstdint>

#include "quant/kv_format.h"  // QS_HOST_DEVICE, kv_div_rn

namespace qserve {

QS_HOST_DEVICE float act_raw_scale(float absmax) { return kv_div_rn(absmax, 127.f); }

// `scale` is the stored (fp16-rounded) scale.
QS_HOST_DEVICE int act_quantize_value(float x, float scale) {
  if (scale == 0.f) return 0;
  const float v = rintf(kv_div_rn(x, scale));
  return static_cast<int>(v < -127.f ? -127.f : (v > 127.f ? 127.f : v));
}

}  // namespace qserve
