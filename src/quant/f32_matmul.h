// Y = X W^T in FP32 for the quantizer's calibration passes and error searches:
// X [t, k] row-major, W [n, k] row-major (a linear layer's [out, in]), Y [t, n].
// Threads over output tiles; AVX2+FMA when the CPU has it (runtime check),
// a plain loop otherwise. Summation order differs between the two paths.
#pragma once

#include <cstdint>

namespace qserve::quant {

void matmul_nt(const float* x, int64_t t, int64_t k, const float* w, int64_t n, float* y);

}  // namespace qserve::quant
