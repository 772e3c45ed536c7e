// Element types of tensors in checkpoints and in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace qserve {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kBool,
};

// Bytes per element.
size_t dtype_size(DType dtype);
// Safetensors spelling: "F32", "F16", "BF16", "I8", "U8", ...
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace qserve
