// The boundary between the W4A8 host code and the wgmma decode kernels for
// m <= 16 / 32 / 64 (kernels/gemm_w4a8_wgemv.cuh), which take the mma.sync
// kernels' parameters (gemm_w4a8_launch.h; p.splits = the cluster size).
// Design: docs/gemm-hopper.md, "wgmma decode kernels".
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "backend/cuda/gemm_w4a8_launch.h"

namespace qserve::cuda::w4a8::wgemv {

// A CTA is one warpgroup on one 64-channel tile and one range of k; the
// splits of a tile's k are the CTAs of one thread block cluster (at most 8).
inline constexpr int kThreads = 128;
inline constexpr int kTileChannels = 64;
inline constexpr int kMaxSplits = 8;
// CTAs per SM the kernel is compiled for (launch bounds: <= 168 registers,
// what the wgmma pipeline's register sets need without serializing).
inline constexpr int kMaxCtasPerSm = 3;
// The kernels, in the order of their tiles: 16, 32 and 64 tokens (the wgmma N).
inline constexpr int kKernelCount = 3;
constexpr int kernel_tokens(int kernel) { return 16 << kernel; }

// 128-wide k blocks of the layer (the last one half when k % 128 == 64);
// CTA r of s takes blocks [r total / s, (r + 1) total / s), at most
// max_k128_blocks of them.
constexpr int k128_total(int k) { return (k / 64 + 1) / 2; }
constexpr int max_k128_blocks(int k, int splits) { return (k128_total(k) + splits - 1) / splits; }
// Row stride (int32) of a CTA's partial tile [tokens][64 channels] in shared
// memory: 4 words of padding put the rows of a lane quad 8 banks apart.
inline constexpr int kPartRowInts = kTileChannels + 4;
// Dynamic shared memory of a CTA: 1 KB of alignment slack, the activations
// of its k range [k128 blocks][tokens][128 B] (the partial tile reuses them
// once the wgmmas are done), then the epilogue's factors
// [64 channel scales][64 scaled zeros][tokens s_x][tokens a_sum] f32.
constexpr size_t smem_bytes(int tokens, int k, int splits) {
  const size_t x = size_t{128} * tokens * static_cast<size_t>(max_k128_blocks(k, splits));
  const size_t part = size_t{4} * kPartRowInts * tokens;
  return 1024 + (x > part ? x : part) + size_t{4} * (2 * kTileChannels + 2 * tokens);
}
// CTAs of this kernel that fit on one SM with `smem_per_sm` bytes of shared
// memory (per CTA 1 KB reserved by the hardware and 1 KB static, the
// compiler's resource report), at most kMaxCtasPerSm.
constexpr int ctas_per_sm(int tokens, int k, int splits, size_t smem_per_sm) {
  const size_t per_cta = smem_bytes(tokens, k, splits) + 2048;
  const size_t fit = smem_per_sm / per_cta;
  return static_cast<int>(fit < kMaxCtasPerSm ? fit : kMaxCtasPerSm);
}

// ceil(n / 64) x splits CTAs (clusters of `splits`), p.m <= kernel_tokens(kernel),
// X 16-byte aligned, smem_bytes(...) within the device's opt-in limit.
void launch_wgemv(bool g128, int kernel, const KernelParams& p, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8::wgemv
