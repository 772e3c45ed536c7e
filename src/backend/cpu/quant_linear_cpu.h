// The quantized linear layers of the CPU backend (the integer oracle of the
// contract, docs/qoq-spec.md sections 2-4): each wraps one layer of a
// quantized checkpoint (quant/quant_linear.h) behind the Linear interface and
// computes through the reference GEMMs of backend/cpu/gemm_w4a8.h, the weights
// unpacked once when the layer is made (1 byte a weight in place of the packed
// 4-bit codes: the INT8 rows of the integer formats, W4A16's codes):
//   W4A8 g128       input INT8 per token;        INT32 acc of Xq * W8hat (8-bit wrap-around level 2)
//   W4A8 per-chan.  input INT8 per token + a_sum; INT32 acc of Xq * W4, zero point in the epilogue
//   W8A8            input INT8 per token;        INT32 acc of Xq * W8
//   W4A16           input float (rounded to fp16); FP32 acc of x * dequantized W4
// Outputs are rounded to fp16 (the epilogue's single rounding), stored as f32.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "quant/quant_linear.h"

namespace qserve::cpu {

// The f16 format becomes the backend's float linear (backend.make_linear).
std::unique_ptr<Linear> make_quantized_linear(Backend& backend, quant::QuantizedLinear layer);

}  // namespace qserve::cpu
