#include "model/gguf_types.h"

namespace qserve {

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return GgmlTypeInfo{"F32", 1, 4, DType::kF32};
    case GgmlType::kF16: return GgmlTypeInfo{"F16", 1, 2, DType::kF16};
    case GgmlType::kBF16: return GgmlTypeInfo{"BF16", 1, 2, DType::kBF16};
    case GgmlType::kQ4_0: return GgmlTypeInfo{"Q4_0", 32, 18, DType::kQ4_0};
    case GgmlType::kQ4_1: return GgmlTypeInfo{"Q4_1", 32, 20, DType::kQ4_1};
    case GgmlType::kQ5_0: return GgmlTypeInfo{"Q5_0", 32, 22, DType::kQ5_0};
    case GgmlType::kQ5_1: return GgmlTypeInfo{"Q5_1", 32, 24, DType::kQ5_1};
    case GgmlType::kQ8_0: return GgmlTypeInfo{"Q8_0", 32, 34, DType::kQ8_0};
    case GgmlType::kQ8_1: return GgmlTypeInfo{"Q8_1", 32, 40, std::nullopt};
    case GgmlType::kQ2_K: return GgmlTypeInfo{"Q2_K", 256, 84, std::nullopt};
    case GgmlType::kQ3_K: return GgmlTypeInfo{"Q3_K", 256, 110, std::nullopt};
    case GgmlType::kQ4_K: return GgmlTypeInfo{"Q4_K", 256, 144, DType::kQ4_K};
    case GgmlType::kQ5_K: return GgmlTypeInfo{"Q5_K", 256, 176, std::nullopt};
    case GgmlType::kQ6_K: return GgmlTypeInfo{"Q6_K", 256, 210, DType::kQ6_K};
    case GgmlType::kQ8_K: return GgmlTypeInfo{"Q8_K", 256, 292, std::nullopt};
    case GgmlType::kI8: return GgmlTypeInfo{"I8", 1, 1, std::nullopt};
    case GgmlType::kI16: return GgmlTypeInfo{"I16", 1, 2, std::nullopt};
    case GgmlType::kI32: return GgmlTypeInfo{"I32", 1, 4, std::nullopt};
    case GgmlType::kI64: return GgmlTypeInfo{"I64", 1, 8, std::nullopt};
    case GgmlType::kF64: return GgmlTypeInfo{"F64", 1, 8, std::nullopt};
  }
  return std::nullopt;
}

}  // namespace qserve
