#include "core/dtype.h"

#include <array>
#include <utility>

namespace qserve {
namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 10> kTypes = {{
    {DType::kF32, "F32", 4},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kF64, "F64", 8},
    {DType::kI8, "I8", 1},
    {DType::kU8, "U8", 1},
    {DType::kI16, "I16", 2},
    {DType::kI32, "I32", 4},
    {DType::kI64, "I64", 8},
    {DType::kBool, "BOOL", 1},
}};
const DTypeInfo& info(DType dtype) { return kTypes[static_cast<size_t>(dtype)]; }
}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTypes) {
    if (t.name == name) return t.dtype;
  }
  return std::nullopt;
}

}  // namespace qserve
