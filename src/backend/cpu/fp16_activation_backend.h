// The CPU reference with the contract's FP16 activations (qoq-spec section 1:
// each block takes FP16 in and gives FP16 out): a Backend that forwards every
// op to an inner backend (the FP32 reference, with or without a KV4 / KV8
// cache) and rounds each float activation it stores to fp16 at the points
// where the CUDA backend stores fp16: linear outputs (logits included), the
// residual stream after each add, norm and SiLU outputs of the float
// precisions, q after RoPE, attention outputs, embeddings. Arithmetic inside
// each op stays FP32, as inside each CUDA kernel.
//
// Device name "cpu-fp16" (engine/backend_factory.h). It is the oracle for the
// GPU's quantized precisions: fp16 rounding moves INT8 activation codes and
// KV codes across rounding boundaries, and a quantized model amplifies such
// moves, so the GPU is compared with the CPU that rounds where it rounds.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace qserve::cpu {

std::unique_ptr<Backend> make_fp16_activation_backend(std::unique_ptr<Backend> inner);

// Rounds every value of an F32 tensor to the nearest fp16 (ties to even); other dtypes untouched.
void round_activations_to_fp16(Tensor& t);

}  // namespace qserve::cpu
