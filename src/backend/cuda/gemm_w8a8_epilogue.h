// Y[m, n] fp16 = (s_x[t] * s_w[o]) * acc[t, o] (quant::epilogue_w8a8).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace qserve::cuda {

void launch_w8a8_epilogue(const int32_t* acc, const __half* s_x, const float* s_w, __half* y, int64_t m, int64_t n,
                          cudaStream_t stream);

}  // namespace qserve::cuda
