#include "model/gguf_dequant.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace qserve {
namespace {

constexpr int kQK = 32;    // block size of the *_0 / *_1 formats
constexpr int kQKK = 256;  // block size of the k-quants

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float load_half(const uint8_t* p) { return half_to_float(load_u16(p)); }

void dequant_q4_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += 18, y += kQK) {
    const float d = load_half(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += 20, y += kQK) {
    const float d = load_half(src);
    const float m = load_half(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

void dequant_q5_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += 22, y += kQK) {
    const float d = load_half(src);
    uint32_t qh;
    std::memcpy(&qh, src + 2, 4);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      y[j] = static_cast<float>(((qs[j] & 0x0F) | xh0) - 16) * d;
      y[j + kQK / 2] = static_cast<float>(((qs[j] >> 4) | xh1) - 16) * d;
    }
  }
}

void dequant_q5_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += 24, y += kQK) {
    const float d = load_half(src);
    const float m = load_half(src + 2);
    uint32_t qh;
    std::memcpy(&qh, src + 4, 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      y[j] = static_cast<float>((qs[j] & 0x0F) | xh0) * d + m;
      y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) | xh1) * d + m;
    }
  }
}

void dequant_q8_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += 34, y += kQK) {
    const float d = load_half(src);
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(qs[j]) * d;
  }
}

// The j-th 6-bit (scale, min) pair of a Q4_K / Q5_K block.
void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void dequant_q4_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += 144) {
    const float d = load_half(src);
    const float dmin = load_half(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* q = src + 16;
    int is = 0;
    for (int j = 0; j < kQKK; j += 64) {
      uint8_t sc, m;
      get_scale_min_k4(is + 0, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void dequant_q6_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += 210) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    const float d = load_half(src + 208);
    for (int n = 0; n < kQKK; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return GgmlTypeInfo{"F32", 1, 4, true};
    case GgmlType::kF16: return GgmlTypeInfo{"F16", 1, 2, true};
    case GgmlType::kBF16: return GgmlTypeInfo{"BF16", 1, 2, true};
    case GgmlType::kQ4_0: return GgmlTypeInfo{"Q4_0", 32, 18, true};
    case GgmlType::kQ4_1: return GgmlTypeInfo{"Q4_1", 32, 20, true};
    case GgmlType::kQ5_0: return GgmlTypeInfo{"Q5_0", 32, 22, true};
    case GgmlType::kQ5_1: return GgmlTypeInfo{"Q5_1", 32, 24, true};
    case GgmlType::kQ8_0: return GgmlTypeInfo{"Q8_0", 32, 34, true};
    case GgmlType::kQ8_1: return GgmlTypeInfo{"Q8_1", 32, 40, false};
    case GgmlType::kQ2_K: return GgmlTypeInfo{"Q2_K", 256, 84, false};
    case GgmlType::kQ3_K: return GgmlTypeInfo{"Q3_K", 256, 110, false};
    case GgmlType::kQ4_K: return GgmlTypeInfo{"Q4_K", 256, 144, true};
    case GgmlType::kQ5_K: return GgmlTypeInfo{"Q5_K", 256, 176, false};
    case GgmlType::kQ6_K: return GgmlTypeInfo{"Q6_K", 256, 210, true};
    case GgmlType::kQ8_K: return GgmlTypeInfo{"Q8_K", 256, 292, false};
    case GgmlType::kI8: return GgmlTypeInfo{"I8", 1, 1, false};
    case GgmlType::kI16: return GgmlTypeInfo{"I16", 1, 2, false};
    case GgmlType::kI32: return GgmlTypeInfo{"I32", 1, 4, false};
    case GgmlType::kI64: return GgmlTypeInfo{"I64", 1, 8, false};
    case GgmlType::kF64: return GgmlTypeInfo{"F64", 1, 8, false};
  }
  return std::nullopt;
}

void dequantize_row(GgmlType type, const void* src_v, float* dst, int64_t n) {
  const auto info = ggml_type_info(static_cast<uint32_t>(type));
  QS_CHECK(info && info->can_dequantize) << "dequantize_row: unsupported type " << static_cast<uint32_t>(type);
  QS_CHECK(n % info->block_size == 0) << "dequantize_row: " << n << " is not a multiple of " << info->block_size;
  const auto* src = static_cast<const uint8_t*>(src_v);
  const int64_t nb = n / info->block_size;
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_half(src + 2 * i);
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(load_u16(src + 2 * i));
      break;
    case GgmlType::kQ4_0: dequant_q4_0(src, dst, nb); break;
    case GgmlType::kQ4_1: dequant_q4_1(src, dst, nb); break;
    case GgmlType::kQ5_0: dequant_q5_0(src, dst, nb); break;
    case GgmlType::kQ5_1: dequant_q5_1(src, dst, nb); break;
    case GgmlType::kQ8_0: dequant_q8_0(src, dst, nb); break;
    case GgmlType::kQ4_K: dequant_q4_k(src, dst, nb); break;
    case GgmlType::kQ6_K: dequant_q6_k(src, dst, nb); break;
    default: QS_CHECK(false) << "unreachable";
  }
}

}  // namespace qserve
