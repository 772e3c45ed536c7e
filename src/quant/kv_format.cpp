#include "quant/kv_format.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace qserve {

KvTokenParams kv_token_params(float mn, float mx, KvDtype dtype) {
  QS_CHECK(kv_has_params(dtype)) << "fp16 KV has no quantization parameters";
  KvTokenParams p;
  kv_token_params_from_range(mn, mx, dtype, [](float v) { return round_to_half(v); }, p.scale, p.zero);
  p.scale_bits = float_to_half(p.scale);
  p.zero_bits = float_to_half(p.zero);
  return p;
}

void kv_quantize_head(const uint16_t* x, int head_dim, KvDtype dtype, uint8_t* values, uint16_t* scale,
                      uint16_t* zero) {
  if (dtype == KvDtype::kFp16) {
    std::memcpy(values, x, static_cast<size_t>(head_dim) * 2);
    return;
  }
  float mn = half_to_float(x[0]), mx = mn;
  for (int i = 1; i < head_dim; ++i) {
    const float v = half_to_float(x[i]);
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  const KvTokenParams p = kv_token_params(mn, mx, dtype);
  *scale = p.scale_bits;
  *zero = p.zero_bits;
  if (dtype == KvDtype::kInt8) {
    for (int i = 0; i < head_dim; ++i)
      values[i] = static_cast<uint8_t>(kv_quantize_value(half_to_float(x[i]), p.scale, p.zero, dtype));
  } else {
    for (int i = 0; i < head_dim; i += 2) {
      const int lo = kv_quantize_value(half_to_float(x[i]), p.scale, p.zero, dtype);
      const int hi = kv_quantize_value(half_to_float(x[i + 1]), p.scale, p.zero, dtype);
      values[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void kv_dequantize_head(const uint8_t* values, uint16_t scale_bits, uint16_t zero_bits, int head_dim,
                        KvDtype dtype, float* out) {
  if (dtype == KvDtype::kFp16) {
    for (int i = 0; i < head_dim; ++i) {
      uint16_t h;
      std::memcpy(&h, values + 2 * i, 2);
      out[i] = half_to_float(h);
    }
    return;
  }
  const float scale = half_to_float(scale_bits), zero = half_to_float(zero_bits);
  for (int i = 0; i < head_dim; ++i) {
    const int q = dtype == KvDtype::kInt8 ? values[i] : (values[i / 2] >> (4 * (i & 1))) & 0xf;
    out[i] = kv_dequantize_value(q, scale, zero);
  }
}

void kv_write_token(const KvPageLayout& layout, uint8_t* page, int head, int slot, const uint16_t* x) {
  uint16_t scale = 0, zero = 0;
  kv_quantize_head(x, layout.head_dim, layout.dtype, page + layout.value_offset(head, slot), &scale, &zero);
  if (kv_has_params(layout.dtype)) {
    std::memcpy(page + layout.scale_offset(head, slot), &scale, 2);
    std::memcpy(page + layout.zero_offset(head, slot), &zero, 2);
  }
}

void kv_read_token(const KvPageLayout& layout, const uint8_t* page, int head, int slot, float* out) {
  uint16_t scale = 0, zero = 0;
  if (kv_has_params(layout.dtype)) {
    std::memcpy(&scale, page + layout.scale_offset(head, slot), 2);
    std::memcpy(&zero, page + layout.zero_offset(head, slot), 2);
  }
  kv_dequantize_head(page + layout.value_offset(head, slot), scale, zero, layout.head_dim, layout.dtype, out);
}

}  // namespace qserve
