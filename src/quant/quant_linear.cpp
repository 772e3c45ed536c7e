#include "quant/quant_linear.h"

#include "core/error.h"
#include "core/half.h"

namespace qserve::quant {

QuantizedLinear quantize_linear(WeightFormat format, const Matrix& w, int64_t group) {
  QuantizedLinear q;
  q.format = format;
  q.n = w.rows;
  q.k = w.cols;
  q.group = w.cols;
  std::span<const float> data(w.data);
  switch (format) {
    case WeightFormat::kF16:
      q.f16.resize(w.data.size());
      for (size_t i = 0; i < w.data.size(); ++i) q.f16[i] = float_to_half(w.data[i]);
      break;
    case WeightFormat::kW4G128:
      q.group = group;
      q.g128 = quantize_w4_g128(data, w.rows, w.cols, group);
      break;
    case WeightFormat::kW4PerChannel:
      q.w4pc = quantize_w4_per_channel(data, w.rows, w.cols);
      break;
    case WeightFormat::kW8PerChannel:
      q.w8 = quantize_w8_per_channel(data, w.rows, w.cols);
      break;
    case WeightFormat::kW4A16:
      q.group = group;
      q.w4a16 = quantize_w4a16(data, w.rows, w.cols, group);
      break;
  }
  return q;
}

std::vector<float> dequantize_linear(const QuantizedLinear& q) {
  switch (q.format) {
    case WeightFormat::kF16: {
      std::vector<float> out(q.f16.size());
      for (size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(q.f16[i]);
      return out;
    }
    case WeightFormat::kW4G128: return dequantize(q.g128);
    case WeightFormat::kW4PerChannel: return dequantize(q.w4pc);
    case WeightFormat::kW4A16: return dequantize(q.w4a16);
    case WeightFormat::kW8PerChannel: {
      std::vector<float> out(static_cast<size_t>(q.n * q.k));
      for (int64_t o = 0; o < q.n; ++o) {
        const float s = half_to_float(q.w8.scale[o]);
        for (int64_t i = 0; i < q.k; ++i) out[o * q.k + i] = s * static_cast<float>(q.w8.q[o * q.k + i]);
      }
      return out;
    }
  }
  QS_CHECK(false) << "unknown weight format";
  return {};
}

}  // namespace qserve::quant
