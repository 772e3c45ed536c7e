// The boundary between the W4A8 host code (gemm_w4a8.cpp) and the decode
// kernels for m <= 8 / 16 (kernels/gemm_w4a8_gemv.cuh), which take the mma.sync
// kernels' parameters (gemm_w4a8_launch.h; the split-K fields unused).
// Design: docs/gemm-hopper.md, "Decode without shared-memory stages".
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/gemm_w4a8_launch.h"

namespace qserve::cuda::w4a8::gemv {

// Resident CTAs per SM of the kernel for `tokens` (8: gemv8, 16: gemv16);
// the planner launches at most this many per SM (persistent beyond).
constexpr int ctas_per_sm(int tokens) { return tokens <= 8 ? 3 : 2; }

// gemv8 at m <= this loads the activations straight from X (no shared-memory
// ring; the kernel's comment says why).
inline constexpr int kMaxDirectTokens = 4;

// `ctas` CTAs walking the ceil(n / 16) 16-channel tiles, `tokens` 8 or 16 per
// CTA tile, p.m <= tokens, X 16-byte aligned. `pdl`: programmatic dependent
// launch (the first weights load while the previous kernel ends).
void launch_gemv(bool g128, int tokens, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8::gemv
