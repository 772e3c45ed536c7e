// A tensor: dtype + shape + a pointer to row-major contiguous data, plus a
// shared owner keeping that memory alive (a heap buffer, or a memory-mapped
// checkpoint file). Copying a Tensor copies the view, not the data.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace qserve {

class Tensor {
 public:
  Tensor() = default;
  // A view of memory kept alive by `owner` (may be null for borrowed memory).
  // Block formats (core/dtype.h): the last dimension a multiple of the block.
  Tensor(DType dtype, std::vector<int64_t> shape, void* data, std::shared_ptr<void> owner = nullptr);

  // Zero-initialised heap tensor.
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return dtype_row_bytes(dtype_, numel()); }  // (block formats: whole blocks)
  bool empty() const { return data_ == nullptr; }

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* data_as() { return static_cast<T*>(data_); }
  template <typename T>
  const T* data_as() const { return static_cast<const T*>(data_); }
  template <typename T>
  std::span<T> span() { return {data_as<T>(), static_cast<size_t>(numel())}; }
  template <typename T>
  std::span<const T> span() const { return {data_as<T>(), static_cast<size_t>(numel())}; }

  const std::shared_ptr<void>& owner() const { return owner_; }

  // "F32[576, 1536]"
  std::string describe() const;

 private:
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

// Converts F32 / F16 / BF16 data, or a GGUF block format's, to a new F32
// tensor (a copy even if F32).
Tensor to_f32(const Tensor& t);
// The same for `n` elements at `src` (block formats: whole blocks) into `dst`:
// a row at a time without a tensor (the CPU's matmul loops, embedding rows).
void widen_to_f32(DType dtype, const void* src, float* dst, int64_t n);

}  // namespace qserve
