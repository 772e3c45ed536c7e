// One quantized linear layer in any of the storage formats of
// quant/weight_format.h (canonical layout, docs/quantized-checkpoint.md), and
// the FP32 matrix it stands for (used by the clipping search and by tests).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/llama_weights.h"
#include "quant/precision.h"
#include "quant/weight_format.h"

namespace qserve::quant {

struct QuantizedLinear {
  WeightFormat format = WeightFormat::kF16;
  int64_t n = 0, k = 0;  // [out, in]
  int64_t group = 0;     // group size of the grouped formats; k for the per-channel ones
  W4G128Weights g128;          // format kW4G128
  W4PerChannelWeights w4pc;    // format kW4PerChannel
  W8PerChannelWeights w8;      // format kW8PerChannel
  W4A16Weights w4a16;          // format kW4A16
  std::vector<uint16_t> f16;   // format kF16: [n, k] fp16 bits
};

// group: 128 (or another size) for the grouped formats, ignored otherwise.
QuantizedLinear quantize_linear(WeightFormat format, const Matrix& w, int64_t group);
// The FP32 weights the quantized layer represents ([n, k], before activation quantization).
std::vector<float> dequantize_linear(const QuantizedLinear& q);

// The layers stacked along the output channels, in order: one [sum n, k]
// layer of the same format (q / k / v, or gate / up, as one GEMM). Every
// format is row-major by output channel with row-local scales and zeros, so
// the result is bit for bit the quantization of the stacked matrix. The parts
// must share format, k and group (kInvalidArgument otherwise).
QuantizedLinear concat_output_channels(std::vector<QuantizedLinear> parts);

}  // namespace qserve::quant
