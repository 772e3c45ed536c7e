// The boundary between the W4A8 host code (gemm_w4a8.cpp) and the decode
// kernel for m <= 8 (kernels/gemm_w4a8_gemv.cuh), which takes the mma.sync
// kernels' parameters (gemm_w4a8_launch.h; the split-K fields unused).
// Design: docs/gemm-hopper.md, "Decode without shared-memory stages".
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/gemm_w4a8_launch.h"

namespace qserve::cuda::w4a8::gemv {

// `ctas` CTAs walking the ceil(n / 16) 16-channel tiles (at most three per
// SM are resident), p.m <= 8, X 4-byte aligned. `pdl`: programmatic dependent
// launch (the first weights load while the previous kernel ends).
void launch_gemv(bool g128, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8::gemv
