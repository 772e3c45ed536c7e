// A W4A8 wgmma consumer warpgroup's work on one pipeline stage
// (kernels/gemm_w4a8_wgmma_kernel.cuh): the register-A W4 tiles' wait, shared
// loads and unpacking (load_stage) and their wgmma group (issue_stage); the
// INT8-weight tiles' group with both operands in shared memory (issue_stage_ss).
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "backend/cuda/kernels/gemm_wgmma_s8.cuh"
#include "backend/cuda/kernels/gemm_wgmma_s8_ss.cuh"

namespace qserve::cuda::w4a8::wgmma {

// Consumer, one stage: waits for the stage's data and turns this warp's
// weights into wgmma A registers: a[j][0..7] the first k64 half of m64 tile
// j, a[j][8..15] the second. A half stage (the last one when k % 128 == 64)
// computes the second half too, on whatever the weight buffer holds, against
// the zeros that TMA wrote for the activations past k: no branch splits the
// wgmma sequence (which made the compiler close the group with a dummy wgmma).
// Both kinds give issue_stage's u8 x s8 wgmmas unsigned bytes: g128 the
// weights biased by 128 (unpack8); per-channel the rows g + 8 (the high
// nibbles) at 16 x their value (unpack8_pc16, one instruction a register; the
// caller divides those accumulators by 16 after the loop, pc_rows8_exact).
// g128's level-2 words of group kt (one 128-wide stage = one group) came with
// the stage (l2st: [8 MT tiles][8] uint32; l2_off[j]: this lane's word of its
// tile j, or -1 past n16).
// kWhole: every A register final before issue_stage's wgmma.fence. Otherwise the
// compiler may sink part of the unpacking between the wgmmas of the group;
// ptxas then injects a wgmma.fence before each wgmma (its C7519 notes) and
// closes each as a group of its own, so that wgmma.wait_group 1 waits for all
// but the last wgmma just issued. That costs the tensor-bound wide token
// tiles (BM >= 128: 3-7.5% on an H100) and helps the latency-bound narrow ones
// (their first wgmma starts before the unpacking ends: BM = 64 1.6-5.6%
// faster); round 43 in docs/gemm-hopper.md.
template <int MT, bool kG128, bool kWhole>
__device__ __forceinline__ void load_stage(uint64_t* full_bar, uint32_t parity, const uint8_t* wst,
                                           const uint32_t* l2st, const int (&w_off)[MT], const int (&l2_off)[MT],
                                           uint32_t (&a)[MT][16]) {
  ptx::mbar_wait(full_bar, parity);
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const Level2 l = kG128 ? level2_params(l2_off[j] >= 0 ? l2st[l2_off[j]] : 0x00010001u) : Level2{};
    const uint4 w0 = *reinterpret_cast<const uint4*>(wst + w_off[j]);
    unpack8_u8<kG128>(w0.x, l, a[j][0], a[j][1]);
    unpack8_u8<kG128>(w0.y, l, a[j][2], a[j][3]);
    unpack8_u8<kG128>(w0.z, l, a[j][4], a[j][5]);
    unpack8_u8<kG128>(w0.w, l, a[j][6], a[j][7]);
    const uint4 w1 = *reinterpret_cast<const uint4*>(wst + w_off[j] + 4096);
    unpack8_u8<kG128>(w1.x, l, a[j][8], a[j][9]);
    unpack8_u8<kG128>(w1.y, l, a[j][10], a[j][11]);
    unpack8_u8<kG128>(w1.z, l, a[j][12], a[j][13]);
    unpack8_u8<kG128>(w1.w, l, a[j][14], a[j][15]);
  }
  // kWhole: unpacked here, not between the wgmmas of the stage's group (reg_fence).
  if constexpr (kWhole)
#pragma unroll
    for (int j = 0; j < MT; ++j) ptx::reg_fence(a[j]);
}

// Consumer, one stage: 4 k32 steps x MT wgmma m64nBMk32 (u8 x s8: the A
// registers as load_stage leaves them), committed as one group. B = the
// stage's X tile: stepping 32 B of k adds 2 to the descriptor.
// kSplit: each wgmma fenced and committed as a group of its own (4 MT groups
// a stage), so that each starts as soon as its own four A registers are
// unpacked, and the caller's wait leaves all of them in flight
// (kGroupsPerStep): what ptxas made of the narrow tiles' first register set
// by itself (round 43), now on both sets and without the wait for all but
// the last wgmma of the group just issued.
template <int BM, int MT, bool kSplit = false>
__device__ __forceinline__ void issue_stage(int32_t (&acc)[MT][BM / 2], const uint32_t (&a)[MT][16], uint64_t desc) {
  auto mma = [&](int j, int r, int dk) {
    if constexpr (kSplit) ptx::wgmma_fence();
    ptx::wgmma_s8_rs<BM, true>(acc[j], a[j][r], a[j][r + 1], a[j][r + 2], a[j][r + 3], desc + dk, 1);
    if constexpr (kSplit) ptx::wgmma_commit();
  };
  if constexpr (!kSplit) ptx::wgmma_fence();
#pragma unroll
  for (int j = 0; j < MT; ++j) mma(j, 0, 0), mma(j, 4, 2);
#pragma unroll
  for (int j = 0; j < MT; ++j) mma(j, 8, 4), mma(j, 12, 6);
  if constexpr (!kSplit) ptx::wgmma_commit();
}
// wgmma groups a stage commits (issue_stage).
template <int MT, bool kSplit>
inline constexpr int kGroupsPerStep = kSplit ? 4 * MT : 1;

// Consumer, one stage of INT8 weights (kS8): 4 k32 steps x MT wgmma
// m64nBMk32 with A = rows 64 (cw MT + j).. of the W stage, committed as one group.
template <int BM, int MT>
__device__ __forceinline__ void issue_stage_ss(int32_t (&acc)[MT][BM / 2], const uint8_t* wst, int cw,
                                               uint64_t desc_b) {
  uint64_t desc_a[MT];
#pragma unroll
  for (int j = 0; j < MT; ++j) desc_a[j] = ptx::smem_desc_sw128(wst + (cw * MT + j) * 8192);
  ptx::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
#pragma unroll
    for (int j = 0; j < MT; ++j) ptx::wgmma_s8_ss<BM>(acc[j], desc_a[j] + 2 * ks, desc_b + 2 * ks, 1);
  ptx::wgmma_commit();
}

}  // namespace qserve::cuda::w4a8::wgmma
