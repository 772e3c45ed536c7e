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
//   neighbor kernel, in the engine): not planned (docs/gemm-hopper.md, gemv16d).
// - kGemv8Resident, kGemv16Resident, kGemv32Resident (gemv8r / 16r / 32r):
//   one CTA of 16 warps per SM, all 16 on one tile at a time (a warp's k
//   blocks are the same in every tile), each warp's activation rows copied
//   into shared memory once per launch and kept there; two chunks of weights
//   in flight per warp, across tiles. The tiles spread over the SMs in steps
//   of one tile per SM (6144 rows: 2.9 per SM), where two CTAs per SM of
//   8 warps leave some SMs two tiles more than others. Shared memory:
//   resident_smem_bytes (the activations grow with m x k). None is planned:
//   gemv32r (the 4096 x 4096 layers at m = 17-32) and gemv16r on Llama-2-7B
//   down gave way to cluster tiles in round 29, gemv16r on Llama-3-8B qkv
//   (g128, m = 9-16) to the 128 x 16 cluster tile at 4 splits in round 34;
//   gemv8r loses to gemv8 / gemv8d everywhere (round 18 of
//   docs/gemm-hopper.md).
enum class Kernel { kGemv8, kGemv16, kGemv8Deep, kGemv16Deep, kGemv8Resident, kGemv16Resident, kGemv32Resident };
inline constexpr int kKernelCount = 7;
constexpr bool is_resident(Kernel kernel) {
  return kernel == Kernel::kGemv8Resident || kernel == Kernel::kGemv16Resident || kernel == Kernel::kGemv32Resident;
}
constexpr int kernel_tokens(Kernel kernel) {
  switch (kernel) {
    case Kernel::kGemv16:
    case Kernel::kGemv16Deep:
    case Kernel::kGemv16Resident: return 16;
    case Kernel::kGemv32Resident: return 32;
    default: return 8;
  }
}
// Warps of a CTA.
constexpr int kernel_warps(Kernel kernel) { return is_resident(kernel) ? 16 : 8; }
// Resident CTAs per SM (the kernel's launch bounds); the planner launches at
// most this many per SM (persistent beyond).
constexpr int ctas_per_sm(Kernel kernel) {
  return kernel == Kernel::kGemv8 ? 3 : is_resident(kernel) ? 1 : 2;
}
// Chunks of weights a warp keeps in flight beyond the one it multiplies.
constexpr int chunks_ahead(Kernel kernel) {
  return kernel == Kernel::kGemv8 || kernel == Kernel::kGemv16 ? 1 : 2;
}
// k64 blocks of a tile that warp 0 (the warp with the most) takes: per-channel
// w, w + W, ...; g128 in pairs of one group (2 w, 2 w + 1, then + 2 W, ...).
constexpr int warp0_blocks(bool g128, int warps, int k) {
  const int k64 = k / 64;
  return g128 ? 2 * (k64 / (2 * warps)) + (k64 % (2 * warps) < 2 ? k64 % (2 * warps) : 2)
              : (k64 + warps - 1) / warps;
}
// Dynamic shared memory of a resident kernel's CTA: every warp's activation
// rows [warp0_blocks][tokens / 8][8 rows][64 B], then the warps' INT32 sums
// of two tiles [2][16 warps][tokens / 2][32] (a tile's epilogue reads one
// while the warps fill the other). 0 for the other kernels (their own sizes).
constexpr size_t resident_smem_bytes(Kernel kernel, bool g128, int k) {
  if (!is_resident(kernel)) return 0;
  const int warps = kernel_warps(kernel), tokens = kernel_tokens(kernel);
  return size_t{512} * warps * warp0_blocks(g128, warps, k) * (tokens / 8) + size_t{2} * warps * (tokens / 2) * 32 * 4;
}
// Shared memory a block may opt in to on sm_90 (227 KB), for planners that
// run without a device, and the most a resident kernel's dynamic shared
// memory may take (2 KB left for its static part).
inline constexpr size_t kSm90SmemOptin = 232448;
inline constexpr size_t kResidentStaticSmem = 2048;
inline constexpr size_t kMaxResidentSmem = kSm90SmemOptin - kResidentStaticSmem;

// The 8-token kernels at m <= this load the activations straight from X (no
// shared-memory ring; the kernel's comment says why).
inline constexpr int kMaxDirectTokens = 4;

// `ctas` CTAs walking the ceil(n / 16) 16-channel tiles, p.m <=
// kernel_tokens(kernel), X 16-byte aligned. `pdl`: programmatic dependent
// launch (the first weights load while the previous kernel ends).
void launch_gemv(bool g128, Kernel kernel, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8::gemv
