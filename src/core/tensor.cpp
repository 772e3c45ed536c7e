#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"

namespace qserve {

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, void* data, std::shared_ptr<void> owner)
    : dtype_(dtype), shape_(std::move(shape)), data_(data), owner_(std::move(owner)) {
  if (dtype_is_blocked(dtype_)) {
    QS_CHECK(!shape_.empty() && shape_.back() % dtype_block_elems(dtype_) == 0)
        << describe() << ": the last dimension is not whole blocks of " << dtype_block_elems(dtype_);
  }
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    QS_CHECK(d >= 0) << "negative dimension";
    n *= d;
  }
  const size_t bytes = dtype_row_bytes(dtype, n);  // (block formats: the constructor checks the last dimension)
  // 64-byte alignment for SIMD loads.
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (p == nullptr) fail(ErrorCode::kResourceExhausted, "out of memory allocating {} bytes", bytes);
  std::memset(p, 0, bytes);
  std::shared_ptr<void> owner(p, [](void* q) { std::free(q); });
  return Tensor(dtype, std::move(shape), p, std::move(owner));
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

std::string Tensor::describe() const {
  std::string s(dtype_name(dtype_));
  s += "[";
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape_[i]);
  }
  return s + "]";
}

void widen_to_f32(DType dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(static_cast<const uint16_t*>(src)[i]);
      return;
    default:
      if (dtype_is_blocked(dtype)) return dequantize_blocks(dtype, src, dst, n);
      fail(ErrorCode::kUnsupported, "cannot convert {} to F32", dtype_name(dtype));
  }
}

Tensor to_f32(const Tensor& t) {
  Tensor out = Tensor::zeros(DType::kF32, t.shape());
  widen_to_f32(t.dtype(), t.data(), out.data_as<float>(), t.numel());
  return out;
}

}  // namespace qserve
