#include "quant/activation_quant.h"

#include <cmath>

#include "core/half.h"

namespace qserve {

void quantize_row_int8(const float* x, int n, int8_t* q, uint16_t* scale, uint16_t* sum) {
  float absmax = 0.f;
  for (int i = 0; i < n; ++i) absmax = std::fmax(absmax, std::fabs(x[i]));
  const uint16_t s_bits = float_to_half(act_raw_scale(absmax));
  const float s = half_to_float(s_bits);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const int v = act_quantize_value(x[i], s);
    q[i] = static_cast<int8_t>(v);
    total += v;
  }
  *scale = s_bits;
  if (sum) *sum = float_to_half(s * static_cast<float>(total));
}

}  // namespace qserve
