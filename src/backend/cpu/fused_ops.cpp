#include "backend/cpu/fused_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "quant/kv_format.h"
#include "quant/weight_format.h"

namespace qserve {

namespace {

// h (f32 values of the fp16 row after the residual add) -> normalized row.
void rmsnorm_row(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int cols, float eps, float* y) {
  double ss = 0;
  for (int i = 0; i < cols; ++i) {
    float h = half_to_float(x[i]);
    if (residual) {
      const uint16_t hb = float_to_half(kv_add_rn(h, half_to_float(residual[i])));
      residual[i] = hb;
      h = half_to_float(hb);
    }
    y[i] = h;
    ss += static_cast<double>(h) * h;
  }
  const float inv = 1.f / std::sqrt(static_cast<float>(ss / cols) + eps);
  for (int i = 0; i < cols; ++i) y[i] = y[i] * inv * half_to_float(gamma[i]);
}

void quantize_rows_out(const float* y, int r, int cols, const Int8Rows& out) {
  const int32_t code_sum = quant::quantize_activation_row(y, cols, out.q + static_cast<int64_t>(r) * cols, out.scale + r,
                                                         out.sum ? out.sum + r : nullptr);
  if (out.code_sum) out.code_sum[r] = code_sum;
}

}  // namespace

void rmsnorm_quant_cpu(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int rows, int cols,
                       float eps, const Int8Rows& out) {
  std::vector<float> y(cols);
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    rmsnorm_row(x + off, residual ? residual + off : nullptr, gamma, cols, eps, y.data());
    quantize_rows_out(y.data(), r, cols, out);
  }
}

void rmsnorm_cpu(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int rows, int cols, float eps,
                 uint16_t* out) {
  std::vector<float> y(cols);
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    rmsnorm_row(x + off, residual ? residual + off : nullptr, gamma, cols, eps, y.data());
    for (int i = 0; i < cols; ++i) out[off + i] = float_to_half(y[i]);
  }
}

void silu_mul_quant_cpu(const uint16_t* gate, const uint16_t* up, int64_t stride, int rows, int cols,
                        const Int8Rows& out) {
  std::vector<float> y(cols);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < cols; ++i) {
      const float a = half_to_float(gate[r * stride + i]), u = half_to_float(up[r * stride + i]);
      y[i] = a / (1.f + std::exp(-a)) * u;
    }
    quantize_rows_out(y.data(), r, cols, out);
  }
}

void quantize_int8_cpu(const uint16_t* x, int rows, int cols, const Int8Rows& out) {
  std::vector<float> y(cols);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < cols; ++i) y[i] = half_to_float(x[static_cast<int64_t>(r) * cols + i]);
    quantize_rows_out(y.data(), r, cols, out);
  }
}

void embedding_gather_cpu(const uint16_t* table, int64_t vocab, const int32_t* ids, int rows, int cols,
                          uint16_t* out) {
  for (int r = 0; r < rows; ++r) {
    QS_CHECK(ids[r] >= 0 && ids[r] < vocab) << "token id " << ids[r] << " outside the vocabulary";
    std::memcpy(out + static_cast<int64_t>(r) * cols, table + static_cast<int64_t>(ids[r]) * cols,
                static_cast<size_t>(cols) * 2);
  }
}

}  // namespace qserve
