#include "backend/cpu/quant_linear_cpu.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "backend/cpu/gemm_w4a8.h"
#include "core/error.h"
#include "core/half.h"

namespace qserve::cpu {
namespace {

using quant::WeightFormat;

// Frees a vector's memory (clear() keeps the capacity).
template <class T>
void release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

class QuantizedLinearCpu final : public Linear {
 public:
  // The INT8 rows of the integer formats (and W4A16's unpacked codes) are
  // derived here, once; the packed codes are then released (the epilogues read
  // only the scales and zeros).
  explicit QuantizedLinearCpu(quant::QuantizedLinear w) : w_(std::move(w)) {
    switch (w_.format) {
      case WeightFormat::kW4G128: s8_ = prepare_s8_weights(w_.g128); release(w_.g128.qweight); break;
      case WeightFormat::kW4PerChannel: s8_ = prepare_s8_weights(w_.w4pc); release(w_.w4pc.qweight); break;
      case WeightFormat::kW8PerChannel: s8_ = prepare_s8_weights(std::exchange(w_.w8.q, {}), w_.n, w_.k); break;
      case WeightFormat::kW4A16: w4a16_ = prepare_w4a16(w_.w4a16); release(w_.w4a16.qweight); break;
      default: break;
    }
  }
  int64_t in_features() const override { return w_.k; }
  int64_t out_features() const override { return w_.n; }
  ActFormat input_format() const override {
    switch (w_.format) {
      case WeightFormat::kW4PerChannel: return ActFormat::kInt8PerTokenSum;
      // (the code sum is what the CUDA g128 kernels need; the reference
      // ignores it, and a layer's input format stays the same on every backend)
      case WeightFormat::kW4G128: return ActFormat::kInt8PerTokenCodeSum;
      case WeightFormat::kW8PerChannel: return ActFormat::kInt8PerToken;
      default: return ActFormat::kFloat;
    }
  }
  void forward(const Activations& x, Tensor& y) const override {
    QS_CHECK(x.format == input_format()) << describe() << " fed " << act_format_name(x.format);
    const int64_t m = x.tokens();
    QS_CHECK(x.dim() == w_.k && y.dim(0) == m && y.dim(1) == w_.n && y.dtype() == DType::kF32)
        << describe() << ": x " << x.values.describe() << ", y " << y.describe();
    std::vector<uint16_t> out(static_cast<size_t>(m * w_.n));
    if (w_.format == WeightFormat::kW4A16) {
      std::vector<uint16_t> xh(static_cast<size_t>(m * w_.k));
      const float* xf = x.values.data_as<float>();
      for (size_t i = 0; i < xh.size(); ++i) xh[i] = float_to_half(xf[i]);
      gemm_w4a16(xh.data(), m, w4a16_, out.data());
    } else {
      // The producers store the per-token scale (and a_sum) as fp16 values in f32.
      std::vector<uint16_t> s_x(m), a_sum;
      for (int64_t t = 0; t < m; ++t) s_x[t] = float_to_half(x.scales.data_as<float>()[t]);
      const int8_t* xq = x.values.data_as<int8_t>();
      if (w_.format == WeightFormat::kW4G128) {
        gemm_w4a8_g128(xq, s_x.data(), m, w_.g128, s8_, nullptr, out.data());
      } else if (w_.format == WeightFormat::kW4PerChannel) {
        a_sum.resize(m);
        for (int64_t t = 0; t < m; ++t) a_sum[t] = float_to_half(x.sums.data_as<float>()[t]);
        gemm_w4a8_per_channel(xq, s_x.data(), a_sum.data(), m, w_.w4pc, s8_, nullptr, out.data());
      } else {
        gemm_w8a8(xq, s_x.data(), m, w_.w8, s8_, nullptr, out.data());
      }
    }
    float* yf = y.data_as<float>();
    for (size_t i = 0; i < out.size(); ++i) yf[i] = half_to_float(out[i]);
  }
  std::string describe() const override {
    return fmt::format("{} [{} -> {}]", quant::weight_format_name(w_.format), w_.k, w_.n);
  }

 private:
  quant::QuantizedLinear w_;
  S8Weights s8_;          // the integer formats' INT8 rows (gemm_w4a8.h)
  W4A16Prepared w4a16_;   // W4A16's codes and scales, channel-minor
};

}  // namespace

std::unique_ptr<Linear> make_quantized_linear(Backend& backend, quant::QuantizedLinear layer) {
  if (layer.format == WeightFormat::kF16) {
    auto holder = std::make_shared<std::vector<uint16_t>>(std::move(layer.f16));
    Tensor w(DType::kF16, {layer.n, layer.k}, holder->data(), std::shared_ptr<void>(holder, holder->data()));
    return backend.make_linear(w, Tensor());
  }
  return std::make_unique<QuantizedLinearCpu>(std::move(layer));
}

}  // namespace qserve::cpu
