#include "core/quant_blocks.h"

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

void dequant_q4_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += 144) {
    const float d = load_half(src);
    const float dmin = load_half(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* q = src + 16;
    int is = 0;
    for (int j = 0; j < kQKK; j += 64) {
      uint8_t sc, m;
      q4_k_scale_min(is + 0, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4_k_scale_min(is + 1, scales, &sc, &m);
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

void dequantize_blocks(DType dtype, const void* src_v, float* dst, int64_t n) {
  QS_CHECK(dtype_is_blocked(dtype)) << "dequantize_blocks: " << dtype_name(dtype) << " is not a block format";
  const int64_t nb = static_cast<int64_t>(dtype_row_bytes(dtype, n) / dtype_block_bytes(dtype));
  const auto* src = static_cast<const uint8_t*>(src_v);
  switch (dtype) {
    case DType::kQ4_0: dequant_q4_0(src, dst, nb); break;
    case DType::kQ4_1: dequant_q4_1(src, dst, nb); break;
    case DType::kQ5_0: dequant_q5_0(src, dst, nb); break;
    case DType::kQ5_1: dequant_q5_1(src, dst, nb); break;
    case DType::kQ8_0: dequant_q8_0(src, dst, nb); break;
    case DType::kQ4_K: dequant_q4_k(src, dst, nb); break;
    case DType::kQ6_K: dequant_q6_k(src, dst, nb); break;
    default: QS_CHECK(false) << "unreachable";
  }
}

}  // namespace qserve
