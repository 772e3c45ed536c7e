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
  if (dtype_is_blocked(dtype)) {
    QS_CHECK(!shape.empty() && shape.back() % dtype_block_elems(dtype) == 0)
        << dtype_name(dtype) << " tensor: the last dimension is not whole blocks of " << dtype_block_elems(dtype);
  }
  const size_t bytes = dtype_row_bytes(dtype, n);
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

Tensor to_f32(const Tensor& t) {
  Tensor out = Tensor::zeros(DType::kF32, t.shape());
  float* dst = out.data_as<float>();
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kF32:
      std::memcpy(dst, t.data(), n * sizeof(float));
      break;
    case DType::kF16: {
      const uint16_t* src = t.data_as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
      break;
    }
    case DType::kBF16: {
      const uint16_t* src = t.data_as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
      break;
    }
    default:
      if (dtype_is_blocked(t.dtype())) {
        dequantize_blocks(t.dtype(), t.data(), dst, n);
        break;
      }
      fail(ErrorCode::kUnsupported, "cannot convert {} to F32", dtype_name(t.dtype()));
  }
  return out;
}

}  // namespace qserve
