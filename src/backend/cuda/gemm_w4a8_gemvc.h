// The boundary between the W4A8 host code (gemm_w4a8.cpp) and the decode
// kernels for 9 <= m <= 64 (kernels/gemm_w4a8_gemvc.cuh): 128-channel CTA
// tiles, k split over the CTAs of a thread block cluster. They take the
// mma.sync kernels' parameters (gemm_w4a8_launch.h): `splits` (the cluster
// size) and `kt_per_split` (128-k units per split); no workspace.
// Design: docs/gemm-hopper.md, "Decode at m = 16-64".
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/gemm_w4a8_launch.h"

namespace qserve::cuda::w4a8::gemvc {

// The kernels, in the order of their tiles (kW4A8FirstGemvcTile + k): 16, 32
// and 64 tokens (2, 4, 8 groups of 8 per weight fragment), each with 8 warps
// of one 16-channel slice (gemvcN) or 4 warps of two (gemvcNx2: a warp's B
// fragments serve two slices, half the shared-memory reads per MMA).
enum class Kernel { kGemvc16, kGemvc32, kGemvc64, kGemvc16x2, kGemvc32x2, kGemvc64x2 };
inline constexpr int kKernelCount = 6;
constexpr int kernel_tokens(Kernel kernel) { return 16 << (static_cast<int>(kernel) % 3); }
constexpr int kernel_warps(Kernel kernel) { return static_cast<int>(kernel) < 3 ? 8 : 4; }
// Resident CTAs per SM (the launch bounds).
constexpr int ctas_per_sm(Kernel kernel) { return static_cast<int>(kernel) < 3 ? 2 : 3; }
inline constexpr int kTileChannels = 128;  // output channels per CTA
inline constexpr int kMaxSplits = 8;       // the portable cluster size

// ceil(n / 128) x p.splits CTAs (clusters of p.splits along x), p.m <=
// kernel_tokens(kernel), p.splits * 2 * p.kt_per_split >= k / 64 with no
// split empty, X 16-byte aligned. `pdl`: programmatic dependent launch.
void launch_gemvc(bool g128, Kernel kernel, const KernelParams& p, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8::gemvc
