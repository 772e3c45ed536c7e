// ggml tensor types and their dequantization to F32, bit-exact with ggml's
// dequantize_row_* (and with the Python `gguf.quants.dequantize`).
// Block layouts (ggml-common.h), `d`/`m`/`dmin` are fp16:
//   Q4_0 [32]:  d, qs[16]            x = (nibble - 8) * d      low nibbles = elements 0..15
//   Q4_1 [32]:  d, m, qs[16]         x = nibble * d + m
//   Q5_0 [32]:  d, qh[4], qs[16]     x = ((nibble | highbit << 4) - 16) * d
//   Q5_1 [32]:  d, m, qh[4], qs[16]  x = (nibble | highbit << 4) * d + m
//   Q8_0 [32]:  d, qs[32] int8       x = q * d
//   Q4_K [256]: d, dmin, scales[12] (8 x 6-bit scale/min pairs), qs[128]
//   Q6_K [256]: ql[128], qh[64], scales[16] int8, d
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace qserve {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeInfo {
  std::string_view name;  // "Q4_1"
  uint32_t block_size;    // elements per block
  uint32_t type_size;     // bytes per block
  bool can_dequantize;    // dequantize_row supports it
};

// nullopt for a type id this reader does not know (its size is unknown too).
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type);

// Dequantizes `n` elements (a multiple of the block size) from `src` into `dst`.
// Requires can_dequantize (QS_CHECK).
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace qserve
