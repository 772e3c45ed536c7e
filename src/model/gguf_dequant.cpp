#include "model/gguf_dequant.h"

#include <bit>
#include <cstring>

#include "core/error.h"
#include "core/quant_blocks.h"
#include "core/half.h"

namespace qserve {

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return GgmlTypeInfo{"F32", 1, 4, true, DType::kF32};
    case GgmlType::kF16: return GgmlTypeInfo{"F16", 1, 2, true, DType::kF16};
    case GgmlType::kBF16: return GgmlTypeInfo{"BF16", 1, 2, true, DType::kBF16};
    case GgmlType::kQ4_0: return GgmlTypeInfo{"Q4_0", 32, 18, true, DType::kQ4_0};
    case GgmlType::kQ4_1: return GgmlTypeInfo{"Q4_1", 32, 20, true, DType::kQ4_1};
    case GgmlType::kQ5_0: return GgmlTypeInfo{"Q5_0", 32, 22, true, DType::kQ5_0};
    case GgmlType::kQ5_1: return GgmlTypeInfo{"Q5_1", 32, 24, true, DType::kQ5_1};
    case GgmlType::kQ8_0: return GgmlTypeInfo{"Q8_0", 32, 34, true, DType::kQ8_0};
    case GgmlType::kQ8_1: return GgmlTypeInfo{"Q8_1", 32, 40, false, std::nullopt};
    case GgmlType::kQ2_K: return GgmlTypeInfo{"Q2_K", 256, 84, false, std::nullopt};
    case GgmlType::kQ3_K: return GgmlTypeInfo{"Q3_K", 256, 110, false, std::nullopt};
    case GgmlType::kQ4_K: return GgmlTypeInfo{"Q4_K", 256, 144, true, DType::kQ4_K};
    case GgmlType::kQ5_K: return GgmlTypeInfo{"Q5_K", 256, 176, false, std::nullopt};
    case GgmlType::kQ6_K: return GgmlTypeInfo{"Q6_K", 256, 210, true, DType::kQ6_K};
    case GgmlType::kQ8_K: return GgmlTypeInfo{"Q8_K", 256, 292, false, std::nullopt};
    case GgmlType::kI8: return GgmlTypeInfo{"I8", 1, 1, false, std::nullopt};
    case GgmlType::kI16: return GgmlTypeInfo{"I16", 1, 2, false, std::nullopt};
    case GgmlType::kI32: return GgmlTypeInfo{"I32", 1, 4, false, std::nullopt};
    case GgmlType::kI64: return GgmlTypeInfo{"I64", 1, 8, false, std::nullopt};
    case GgmlType::kF64: return GgmlTypeInfo{"F64", 1, 8, false, std::nullopt};
  }
  return std::nullopt;
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const auto info = ggml_type_info(static_cast<uint32_t>(type));
  QS_CHECK(info && info->can_dequantize) << "dequantize_row: unsupported type " << static_cast<uint32_t>(type);
  QS_CHECK(n % info->block_size == 0) << "dequantize_row: " << n << " is not a multiple of " << info->block_size;
  const DType dtype = *info->dtype;
  if (dtype_is_blocked(dtype)) {
    dequantize_blocks(dtype, src, dst, n);
    return;
  }
  const auto* p = static_cast<const uint8_t*>(src);  // (byte loads: the data may be unaligned)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, p + i * static_cast<int64_t>(dtype_size(dtype)), dtype_size(dtype));
    dst[i] = dtype == DType::kF32 ? std::bit_cast<float>(bits)
             : dtype == DType::kF16 ? half_to_float(static_cast<uint16_t>(bits))
                                    : bf16_to_float(static_cast<uint16_t>(bits));
  }
}

}  // namespace qserve
