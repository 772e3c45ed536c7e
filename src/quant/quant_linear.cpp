#include "quant/quant_linear.h"

#include <utility>

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

namespace {

// Appends the rows of `from` to `to`: each listed [n, ...] array, and n.
template <typename W, typename... Arrays>
void stack_rows(W& to, const W& from, Arrays W::*... arrays) {
  ((to.*arrays).insert((to.*arrays).end(), (from.*arrays).begin(), (from.*arrays).end()), ...);
  to.n += from.n;
}

}  // namespace

QuantizedLinear concat_output_channels(std::vector<QuantizedLinear> parts) {
  if (parts.empty()) fail(ErrorCode::kInvalidArgument, "concat_output_channels: no layers");
  QuantizedLinear out = std::move(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    const QuantizedLinear& p = parts[i];
    if (p.format != out.format || p.k != out.k || p.group != out.group)
      fail(ErrorCode::kInvalidArgument,
           "concat_output_channels: layer {} is {} with k {} and group {}, the first {} with k {} and group {}", i,
           weight_format_name(p.format), p.k, p.group, weight_format_name(out.format), out.k, out.group);
    out.n += p.n;
    switch (out.format) {
      case WeightFormat::kF16: out.f16.insert(out.f16.end(), p.f16.begin(), p.f16.end()); break;
      case WeightFormat::kW4G128:
        stack_rows(out.g128, p.g128, &W4G128Weights::qweight, &W4G128Weights::s1, &W4G128Weights::s2,
                   &W4G128Weights::zero);
        break;
      case WeightFormat::kW4PerChannel:
        stack_rows(out.w4pc, p.w4pc, &W4PerChannelWeights::qweight, &W4PerChannelWeights::scale,
                   &W4PerChannelWeights::zero);
        break;
      case WeightFormat::kW8PerChannel:
        stack_rows(out.w8, p.w8, &W8PerChannelWeights::q, &W8PerChannelWeights::scale);
        break;
      case WeightFormat::kW4A16:
        stack_rows(out.w4a16, p.w4a16, &W4A16Weights::qweight, &W4A16Weights::scale, &W4A16Weights::zero);
        break;
    }
  }
  return out;
}

}  // namespace qserve::quant
