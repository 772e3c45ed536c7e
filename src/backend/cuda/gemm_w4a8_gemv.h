// The boundary between the W4A8 host code (gemm_w4a8.cpp) and the decode
// kernels for m <= 8 / 16 (kernels/gemm_w4a8_gemv.cuh), which take the mma.sync
// kernels' parameters (gemm_w4a8_launch.h; the split-K fields unused).
// Design: docs/gemm-hopper.md, "Decode without shared-memory stages".
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/gemm_w4a8_launch.h"

namespace qserve::cuda::w4a8::gemv {

// The decode kernels, in the order of their tiles (kW4A8FirstGemvTile + k):
// - kGemv8: 8 tokens, three CTAs per SM, the next chunk's weights in flight;
// - kGemv16: 16 tokens (two 8-token groups per weight fragment), two per SM;
// - kGemv8Deep: gemv8 at two CTAs per SM with the next two chunks' weights
//   in flight (the registers of gemv8's third CTA spent on twice the loads
//   in flight per warp: for layers of at most two tiles per SM);
// - kGemv16Deep: gemv16 with the next two chunks' weights in flight (its
//   registers allow it at two CTAs per SM): faster where the CTAs walk
//   several tiles each (round 2 of bench/results/2026-12-01-gemm-h200-r16.md:
//   the 6144 x 4096 layer at m = 16), slower on layers of two tiles per SM;
//   timed as its own tile on 2026-12-01, it does not win in context (after a
//   neighbor kernel, in the engine): not planned (docs/gemm-hopper.md, tile 48).
enum class Kernel { kGemv8, kGemv16, kGemv8Deep, kGemv16Deep };
inline constexpr int kKernelCount = 4;
constexpr int kernel_tokens(Kernel kernel) {
  return kernel == Kernel::kGemv16 || kernel == Kernel::kGemv16Deep ? 16 : 8;
}
// Resident CTAs per SM (the kernel's launch bounds); the planner launches at
// most this many per SM (persistent beyond).
constexpr int ctas_per_sm(Kernel kernel) { return kernel == Kernel::kGemv8 ? 3 : 2; }
// Chunks of weights a warp keeps in flight beyond the one it multiplies.
constexpr int chunks_ahead(Kernel kernel) {
  return kernel == Kernel::kGemv8Deep || kernel == Kernel::kGemv16Deep ? 2 : 1;
}

// The 8-token kernels at m <= this load the activations straight from X (no
// shared-memory ring; the kernel's comment says why).
inline constexpr int kMaxDirectTokens = 4;

// `ctas` CTAs walking the ceil(n / 16) 16-channel tiles, p.m <=
// kernel_tokens(kernel), X 16-byte aligned. `pdl`: programmatic dependent
// launch (the first weights load while the previous kernel ends).
void launch_gemv(bool g128, Kernel kernel, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8::gemv
