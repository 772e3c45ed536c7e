// Element types of tensors in checkpoints and in memory.
//
// Besides the scalar types, the GGUF (ggml) block formats: a row of such a
// tensor is a run of blocks, each holding `dtype_block_elems` consecutive
// elements of the row in `dtype_block_bytes` bytes (fp16 scales and packed
// codes; layouts and dequantization in core/quant_blocks.h). A blocked
// tensor's last dimension is a multiple of the block; it has no per-element
// address, so code that reads it element by element widens it first
// (to_f32) or multiplies in its blocks (the CPU matmul).
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
  // GGUF block formats (the names are ggml's)
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ4_K,
  kQ6_K,
};

// Bytes per element of a scalar type (QS_CHECK: not a block format).
size_t dtype_size(DType dtype);
// Safetensors spelling: "F32", "F16", "BF16", "I8", "U8", ...; ggml's for the
// block formats ("Q4_1", "Q4_K", ...).
std::string_view dtype_name(DType dtype);
// Any name dtype_name gives, block formats included (a safetensors reader
// must refuse those: dtype_is_blocked).
std::optional<DType> dtype_from_name(std::string_view name);

// Block formats: elements and bytes per block (scalar types: 1 and dtype_size).
bool dtype_is_blocked(DType dtype);
int64_t dtype_block_elems(DType dtype);
size_t dtype_block_bytes(DType dtype);
// Bytes of `elems` consecutive elements of a row (QS_CHECK: a whole number of
// blocks), e.g. a row of a [rows, cols] tensor, or a whole tensor's numel.
size_t dtype_row_bytes(DType dtype, int64_t elems);

}  // namespace qserve
