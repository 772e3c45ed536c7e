// The linear layers of the CUDA model backend (fp16 activations in and out):
//   float (fp16 weights)   cuBLAS FP16 GEMM, FP32 accumulation, + bias
//   W4A8 per-channel / g128  gemm_w4a8 (weights repacked at load), INT8 input + fp16 scale (+ sum)
//   W8A8                   cuBLASLt INT8 -> INT32, then the fp16 epilogue
//   W4A16                  dequantized to fp16 at load, then the float path
//                          (a first step: the weights take 16 bits in memory, not 4)
#pragma once

#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend_state.h"
#include "quant/quant_linear.h"

namespace qserve::cuda {

// weight: host [out, in] F32 / F16 / BF16; bias: host [out] or empty.
std::unique_ptr<Linear> make_f16_linear(const std::shared_ptr<CudaBackendState>& state, const Tensor& weight,
                                        const Tensor& bias);
std::unique_ptr<Linear> make_quantized_linear(const std::shared_ptr<CudaBackendState>& state,
                                              quant::QuantizedLinear&& layer);

}  // namespace qserve::cuda
