// The paged KV cache format (docs/kv-cache-layout.md): per-token, per-head
// asymmetric KV4 / KV8 quantization (qoq-spec.md section 5) and the byte
// addressing of a page. Header-only and __host__ __device__, so that the CPU
// reference and the CUDA kernels share one definition of every offset and of
// the per-element quantization arithmetic (the CPU and GPU writers produce
// byte-identical pages).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace qserve {

enum class KvDtype : uint8_t {
  kInt4 = 0,  // 4-bit codes, two per byte, + fp16 (scale, zero) per token and head
  kInt8 = 1,  // 8-bit codes + fp16 (scale, zero) per token and head
  kFp16 = 2,  // plain fp16 values, no parameters
};

QS_HOST_DEVICE constexpr int kv_bits(KvDtype dtype) {
  return dtype == KvDtype::kInt4 ? 4 : dtype == KvDtype::kInt8 ? 8 : 16;
}
// Largest code: 15 (KV4) or 255 (KV8).
QS_HOST_DEVICE constexpr int kv_max_code(KvDtype dtype) { return dtype == KvDtype::kInt4 ? 15 : 255; }
QS_HOST_DEVICE constexpr bool kv_has_params(KvDtype dtype) { return dtype != KvDtype::kFp16; }
QS_HOST_DEVICE constexpr int64_t kv_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Every region of a page starts on a 16-byte boundary (128-bit loads, cp.async).
inline constexpr int kKvAlign = 16;

// The geometry of one page of one layer's K (or V) pool. A page holds
// `page_size` consecutive token positions of one sequence for every KV head:
//
//   page  = [num_kv_heads] head blocks, each head_block_bytes()
//   block = values region  [page_size][token_value_bytes()]   (codes or fp16)
//           params region  [page_size] x {fp16 scale, fp16 zero} (absent for fp16)
//   each region padded to a multiple of 16 bytes.
//
// 4-bit codes: element 2j of a token's head vector in the low nibble of byte
// j, element 2j+1 in the high nibble (the canonical packing of qoq-spec 4b).
struct KvPageLayout {
  int32_t page_size = 64;  // tokens per page (runtime; QServe uses 64)
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // 64 or 128 (any multiple of 32 is addressable)
  KvDtype dtype = KvDtype::kInt4;

  QS_HOST_DEVICE constexpr int64_t token_value_bytes() const {
    return static_cast<int64_t>(head_dim) * kv_bits(dtype) / 8;
  }
  QS_HOST_DEVICE constexpr int64_t values_region_bytes() const {
    return kv_round_up(page_size * token_value_bytes(), kKvAlign);
  }
  QS_HOST_DEVICE constexpr int64_t params_region_bytes() const {
    return kv_has_params(dtype) ? kv_round_up(int64_t{page_size} * 4, kKvAlign) : 0;
  }
  QS_HOST_DEVICE constexpr int64_t head_block_bytes() const {
    return values_region_bytes() + params_region_bytes();
  }
  QS_HOST_DEVICE constexpr int64_t page_bytes() const { return head_block_bytes() * num_kv_heads; }

  // Byte offsets inside a page, for slot `slot` (0 <= slot < page_size).
  QS_HOST_DEVICE constexpr int64_t head_block_offset(int head) const { return head_block_bytes() * head; }
  QS_HOST_DEVICE constexpr int64_t value_offset(int head, int slot) const {
    return head_block_offset(head) + token_value_bytes() * slot;
  }
  // fp16 scale at scale_offset, fp16 zero right after it (scale_offset + 2).
  QS_HOST_DEVICE constexpr int64_t scale_offset(int head, int slot) const {
    return head_block_offset(head) + values_region_bytes() + int64_t{4} * slot;
  }
  QS_HOST_DEVICE constexpr int64_t zero_offset(int head, int slot) const { return scale_offset(head, slot) + 2; }

  bool operator==(const KvPageLayout&) const = default;
};

// One layer's cache as the kernels see it: K and V pools with the same
// layout; physical page p of K starts at k_pages + p * page_bytes(), and the
// same page index addresses V. Page tables are per sequence (see the batch
// structs of the attention ops).
struct PagedKvCache {
  uint8_t* k_pages = nullptr;  // [num_pages, layout.page_bytes()]
  uint8_t* v_pages = nullptr;  // [num_pages, layout.page_bytes()]
  int32_t num_pages = 0;
  KvPageLayout layout;

  bool operator==(const PagedKvCache&) const = default;
};

// ---- per-element arithmetic shared by every writer and reader ----------------

QS_HOST_DEVICE float kv_div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
QS_HOST_DEVICE float kv_sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
QS_HOST_DEVICE float kv_add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
QS_HOST_DEVICE float kv_mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// The stored (fp16) scale and zero of a token-head whose values span
// [mn, mx]; `to_half` rounds a float to the nearest fp16 value (host and
// device pass their own conversion).
//   scale = fp16((mx - mn) / max_code), zero = fp16(-mn / scale).
// Two cases the spec formula cannot store:
//  - degenerate: scale rounds to 0 (mx == mn, or a range below fp16's
//    resolution): scale = 1, zero = -mn; every code is 0 and dequantization
//    returns mn, which is x exactly when mx == mn (-mn is an fp16 value).
//  - zero outside fp16 (a narrow range far from 0): the range is widened to
//    include 0, so that zero lies in [0, max_code].
template <typename ToHalf>
QS_HOST_DEVICE void kv_token_params_from_range(float mn, float mx, KvDtype dtype, ToHalf to_half, float& scale,
                                               float& zero) {
  const float levels = static_cast<float>(kv_max_code(dtype));
  scale = to_half(kv_div_rn(kv_sub_rn(mx, mn), levels));
  if (scale == 0.f) {
    scale = 1.f;
    zero = -mn;
    return;
  }
  zero = to_half(kv_div_rn(-mn, scale));
  if (!(fabsf(zero) <= 65504.f)) {
    mn = fminf(mn, 0.f);
    mx = fmaxf(mx, 0.f);
    scale = to_half(kv_div_rn(kv_sub_rn(mx, mn), levels));
    zero = to_half(kv_div_rn(-mn, scale));
  }
}

// q = clamp(round(x / scale + zero), 0, max_code), round half to even;
// scale and zero are the stored fp16 values.
QS_HOST_DEVICE int kv_quantize_value(float x, float scale, float zero, KvDtype dtype) {
  const float v = rintf(kv_add_rn(kv_div_rn(x, scale), zero));
  const float hi = static_cast<float>(kv_max_code(dtype));
  return static_cast<int>(v < 0.f ? 0.f : (v > hi ? hi : v));
}

// xhat = (q - zero) * scale.
QS_HOST_DEVICE float kv_dequantize_value(int q, float scale, float zero) {
  return kv_mul_rn(kv_sub_rn(static_cast<float>(q), zero), scale);
}

// ---- host helpers (kv_format.cpp) ------------------------------------------
struct KvTokenParams {
  uint16_t scale_bits = 0, zero_bits = 0;  // stored fp16
  float scale = 0.f, zero = 0.f;           // the same values as float
};
// Parameters for a token-head whose values span [mn, mx] (fp16 values).
KvTokenParams kv_token_params(float mn, float mx, KvDtype dtype);
// Quantizes one token-head vector x[head_dim] (fp16 bits) into `values`
// (token_value_bytes() bytes) and its fp16 scale / zero (untouched for fp16).
void kv_quantize_head(const uint16_t* x, int head_dim, KvDtype dtype, uint8_t* values, uint16_t* scale,
                      uint16_t* zero);
void kv_dequantize_head(const uint8_t* values, uint16_t scale, uint16_t zero, int head_dim, KvDtype dtype,
                        float* out);
// Quantize + store / load + dequantize one token-head at (head, slot) of a page.
void kv_write_token(const KvPageLayout& layout, uint8_t* page, int head, int slot, const uint16_t* x);
void kv_read_token(const KvPageLayout& layout, const uint8_t* page, int head, int slot, float* out);

}  // namespace qserve
