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

template <typename T>
void append(std::vector<T>& to, std::vector<T>&& from) {
  to.insert(to.end(), from.begin(), from.end());
  from = {};
}

}  // namespace

QuantizedLinear concat_output_channels(std::vector<QuantizedLinear> parts) {
  if (parts.empty()) fail(ErrorCode::kInvalidArgument, "concat_output_channels: no layers");
  QuantizedLinear out = std::move(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    QuantizedLinear& p = parts[i];
    if (p.format != out.format || p.k != out.k || p.group != out.group)
      fail(ErrorCode::kInvalidArgument,
           "concat_output_channels: layer {} is {} with k {} and group {}, the first {} with k {} and group {}", i,
           weight_format_name(p.format), p.k, p.group, weight_format_name(out.format), out.k, out.group);
    out.n += p.n;
    switch (out.format) {
      case WeightFormat::kF16: append(out.f16, std::move(p.f16)); break;
      case WeightFormat::kW4G128:
        append(out.g128.qweight, std::move(p.g128.qweight));
        append(out.g128.s1, std::move(p.g128.s1));
        append(out.g128.s2, std::move(p.g128.s2));
        append(out.g128.zero, std::move(p.g128.zero));
        out.g128.n += p.g128.n;
        break;
      case WeightFormat::kW4PerChannel:
        append(out.w4pc.qweight, std::move(p.w4pc.qweight));
        append(out.w4pc.scale, std::move(p.w4pc.scale));
        append(out.w4pc.zero, std::move(p.w4pc.zero));
        out.w4pc.n += p.w4pc.n;
        break;
      case WeightFormat::kW8PerChannel:
        append(out.w8.q, std::move(p.w8.q));
        append(out.w8.scale, std::move(p.w8.scale));
        out.w8.n += p.w8.n;
        break;
      case WeightFormat::kW4A16:
        append(out.w4a16.qweight, std::move(p.w4a16.qweight));
        append(out.w4a16.scale, std::move(p.w4a16.scale));
        append(out.w4a16.zero, std::move(p.w4a16.zero));
        out.w4a16.n += p.w4a16.n;
        break;
    }
  }
  return out;
}

}  // namespace qserve::quant
