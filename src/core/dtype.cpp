#include "core/dtype.h"

#include <array>
#include <utility>

#include "core/error.h"

namespace qserve {
namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;        // bytes per block (scalar types: per element)
  int64_t block = 1;  // elements per block
};
constexpr std::array<DTypeInfo, 17> kTypes = {{
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
    {DType::kQ4_0, "Q4_0", 18, 32},
    {DType::kQ4_1, "Q4_1", 20, 32},
    {DType::kQ5_0, "Q5_0", 22, 32},
    {DType::kQ5_1, "Q5_1", 24, 32},
    {DType::kQ8_0, "Q8_0", 34, 32},
    {DType::kQ4_K, "Q4_K", 144, 256},
    {DType::kQ6_K, "Q6_K", 210, 256},
}};
constexpr bool in_enum_order() {
  for (size_t i = 0; i < kTypes.size(); ++i)
    if (static_cast<size_t>(kTypes[i].dtype) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kTypes is indexed by DType");
const DTypeInfo& info(DType dtype) { return kTypes[static_cast<size_t>(dtype)]; }
}  // namespace

size_t dtype_size(DType dtype) {
  QS_CHECK(info(dtype).block == 1) << "dtype_size of the block format " << info(dtype).name << " (use dtype_row_bytes)";
  return info(dtype).size;
}
bool dtype_is_blocked(DType dtype) { return info(dtype).block != 1; }
int64_t dtype_block_elems(DType dtype) { return info(dtype).block; }
size_t dtype_block_bytes(DType dtype) { return info(dtype).size; }
size_t dtype_row_bytes(DType dtype, int64_t elems) {
  const DTypeInfo& t = info(dtype);
  QS_CHECK(elems >= 0 && elems % t.block == 0) << elems << " elements of " << t.name << " are not whole blocks of " << t.block;
  return static_cast<size_t>(elems / t.block) * t.size;
}
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kTypes) {
    if (t.name == name) return t.dtype;
  }
  return std::nullopt;
}

}  // namespace qserve
