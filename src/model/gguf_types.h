// ggml tensor type ids as a GGUF file names them, their block geometry, and
// the tensor element type (core/dtype.h) each loads as. The block formats'
// layouts and dequantization live in core/quant_blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"

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
  // The tensor element type it loads as (F32, F16, BF16 or a block format);
  // nullopt for a type this reader sizes but does not load.
  std::optional<DType> dtype;
};

// nullopt for a type id this reader does not know (its size is unknown too).
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type);

}  // namespace qserve
