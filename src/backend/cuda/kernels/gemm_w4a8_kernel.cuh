// The W4A8 mma.sync kernel template (see ../gemm_w4a8.h for the design and
// quant/w4a8_repack.h for the weight layout).
//
// CTA tile: BN output channels x BM tokens x 64 input channels per stage.
// Warps: WARPS_N along channels x WARPS_M along tokens; a warp owns
// MI = BN / WARPS_N / 16 MMA rows-tiles (channels) and NI = BM / WARPS_M / 8
// MMA column tiles (tokens). MMA A = weights (16 channels), B = activations.
//
// Shared memory per stage:
//   W  [BN/16][32 lanes][16 B]          compute order (4 KB contiguous per 128 channels in global),
//                                       read once per lane (conflict-free)
//   X  [BM][64 B], 16-B chunk c of row r stored at chunk c ^ ((r >> 1) & 3)
//      (ldmatrix's 8 row reads of one chunk hit 8 distinct bank groups)
//   L2 [BN/16][8] uint32                g128 level-2 parameters of this k tile's group
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "backend/cuda/gemm_w4a8_launch.h"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "backend/cuda/kernels/mma_primitives.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "quant/gemm_epilogue.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8 {

template <int BN_, int BM_, int WARPS_N_, int WARPS_M_, int STAGES_>
struct TileConfig {
  static constexpr int BN = BN_, BM = BM_, WARPS_N = WARPS_N_, WARPS_M = WARPS_M_, STAGES = STAGES_;
  static constexpr int kThreads = 32 * WARPS_N * WARPS_M;
  static constexpr int MI = BN / WARPS_N / 16;
  static constexpr int NI = BM / WARPS_M / 8;
  static_assert(MI >= 1 && NI >= 1 && BN % (16 * WARPS_N) == 0 && BM % (8 * WARPS_M) == 0);
  static constexpr int kWBytes = BN * 32;
  static constexpr int kXBytes = BM * 64;
  static constexpr int kL2Bytes = BN * 2;
  static constexpr int kStageBytes = kWBytes + kXBytes + kL2Bytes;
  static constexpr int kSmemBytes = STAGES * kStageBytes;
};


// Issues one pipeline stage's cp.async copies. Every per-thread source offset
// is computed once (the constructor); a stage only adds the k tile's offset,
// so the copy loop has no per-element address arithmetic. Offsets are 32-bit
// (the host checks that m * k and the weight size fit).
template <class Cfg, bool kG128>
struct StageLoader {
  static constexpr int T = Cfg::kThreads;
  static constexpr int kWChunks = Cfg::BN * 2;  // BN/16 blocks of 32 x 16 B
  static constexpr int kXChunks = Cfg::BM * 4;  // BM rows of 4 x 16 B
  static constexpr int kLChunks = Cfg::BN / 8;  // BN/16 blocks of 2 x 16 B
  static constexpr int kWIters = (kWChunks + T - 1) / T;
  static constexpr int kXIters = (kXChunks + T - 1) / T;
  static constexpr int kLIters = kG128 ? (kLChunks + T - 1) / T : 0;
  static_assert(kWIters <= 8 && kXIters <= 8 && kLIters <= 8);

  uint32_t w_off[kWIters];  // uint4 units from p.w, k tile 0
  uint32_t x_off[kXIters];  // bytes from p.x, k tile 0
  uint32_t x_dst[kXIters];  // swizzled byte offset inside the stage's X tile
  uint32_t l_off[kLIters > 0 ? kLIters : 1];  // uint32 units from p.level2, group 0
  uint32_t valid = 0;       // bit j: W chunk j, 8 + j: X chunk j, 16 + j: L2 chunk j

  __device__ __forceinline__ StageLoader(const KernelParams& p, int n16_base, int m_base) {
    const int tid = threadIdx.x;
    const int kt_total = p.k >> 6;
#pragma unroll
    for (int j = 0; j < kWIters; ++j) {
      const int i = tid + j * T;
      const int t = n16_base + (i >> 5);
      const bool ok = i < kWChunks && t < p.n16;
      // Layout [n/128][k/64][8][32] x 16 B (quant/w4a8_repack.h).
      w_off[j] = ok ? ((static_cast<uint32_t>(t >> 3) * kt_total * 8 + (t & 7)) * 32 + (i & 31)) : 0u;
      valid |= static_cast<uint32_t>(ok) << j;
    }
#pragma unroll
    for (int j = 0; j < kXIters; ++j) {
      const int i = tid + j * T;
      const int r = i >> 2, c = i & 3;
      const bool ok = i < kXChunks && m_base + r < p.m;
      x_off[j] = ok ? static_cast<uint32_t>(m_base + r) * p.k + c * 16 : 0u;
      x_dst[j] = r * 64 + ((c ^ ((r >> 1) & 3)) << 4);
      valid |= static_cast<uint32_t>(ok) << (8 + j);
    }
#pragma unroll
    for (int j = 0; j < kLIters; ++j) {
      const int i = tid + j * T;
      const int t = n16_base + (i >> 1);
      const bool ok = i < kLChunks && t < p.n16;
      l_off[j] = ok ? static_cast<uint32_t>(quant::level2_word_offset(t, 0, p.groups)) + (i & 1) * 4 : 0u;
      valid |= static_cast<uint32_t>(ok) << (16 + j);
    }
  }

  // The weights (and g128 level-2 parameters) of k tile kt: data no kernel
  // writes, so it may be loaded before the dependency wait (kernels/pdl.cuh).
  __device__ __forceinline__ void load_w(const KernelParams& p, uint8_t* stage, int kt) const {
    const int tid = threadIdx.x;
#pragma unroll
    for (int j = 0; j < kWIters; ++j)
      if (kWChunks % T == 0 || tid + j * T < kWChunks)
        ptx::cp_async16(stage + (tid + j * T) * 16, p.w + w_off[j] + kt * 256, (valid >> j) & 1);
    if constexpr (kG128) {
#pragma unroll
      for (int j = 0; j < kLIters; ++j)
        if (kLChunks % T == 0 || tid + j * T < kLChunks)
          ptx::cp_async16(stage + Cfg::kWBytes + Cfg::kXBytes + (tid + j * T) * 16,
                          p.level2 + l_off[j] + (kt >> 1) * 64, (valid >> (16 + j)) & 1);  // next group: +64 words
    }
  }
  // The activations of k tile kt (written by the previous kernel).
  __device__ __forceinline__ void load_x(const KernelParams& p, uint8_t* stage, int kt) const {
    const int tid = threadIdx.x;
#pragma unroll
    for (int j = 0; j < kXIters; ++j)
      if (kXChunks % T == 0 || tid + j * T < kXChunks)
        ptx::cp_async16(stage + Cfg::kWBytes + x_dst[j], p.x + x_off[j] + kt * 64, (valid >> (8 + j)) & 1);
  }
  __device__ __forceinline__ void load(const KernelParams& p, uint8_t* stage, int kt) const {
    load_w(p, stage, kt);
    load_x(p, stage, kt);
  }
};

template <class Cfg, bool kG128>
__global__ void __launch_bounds__(Cfg::kThreads) gemm_w4a8_kernel(const KernelParams p) {
  constexpr int MI = Cfg::MI, NI = Cfg::NI, STAGES = Cfg::STAGES;
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int s_is_last;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_n = warp % Cfg::WARPS_N, warp_m = warp / Cfg::WARPS_N;
  const int n16_base = blockIdx.x * (Cfg::BN / 16);
  const int m_base = blockIdx.y * Cfg::BM;
  const int split = blockIdx.z;
  const int kt_total = p.k >> 6;
  const int kt_begin = split * p.kt_per_split;
  const int kt_count = min(kt_total, kt_begin + p.kt_per_split) - kt_begin;

  int32_t acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0;

  // Prologue: the weights of the first STAGES - 1 k tiles before the
  // dependency wait (they join the first commit group), the activations
  // after it: with programmatic dependent launch the weight stream starts
  // while the previous kernel finishes (kernels/pdl.cuh).
  const StageLoader<Cfg, kG128> loader(p, n16_base, m_base);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s)
    if (s < kt_count) loader.load_w(p, smem + s * Cfg::kStageBytes, kt_begin + s);
  ptx::pdl_wait();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kt_count) loader.load_x(p, smem + s * Cfg::kStageBytes, kt_begin + s);
    ptx::cp_async_commit();
  }

  // Per-lane offsets inside a stage.
  const int w_off = ((warp_n * MI) * 32 + lane) * 16;
  // Rows ni * 8 apart share the swizzle ((row >> 1) & 3), so one offset + ni * 512.
  const int x_row = warp_m * (Cfg::BM / Cfg::WARPS_M) + (lane & 7);
  const int x_off = Cfg::kWBytes + x_row * 64 + (((lane >> 3) ^ ((x_row >> 1) & 3)) << 4);
  const int l2_off = Cfg::kWBytes + Cfg::kXBytes + ((warp_n * MI) * 8 + (lane >> 2)) * 4;

  int read_stage = 0, write_stage = STAGES - 1;  // it % STAGES, (it + STAGES - 1) % STAGES
  for (int it = 0; it < kt_count; ++it) {
    ptx::cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (it + STAGES - 1 < kt_count) loader.load(p, smem + write_stage * Cfg::kStageBytes, kt_begin + it + STAGES - 1);
    ptx::cp_async_commit();
    const uint8_t* stage = smem + read_stage * Cfg::kStageBytes;
    read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;

    uint32_t xr[NI][4];
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) ptx::ldmatrix_x4(xr[ni], stage + x_off + ni * 512);

#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const uint4 wv = *reinterpret_cast<const uint4*>(stage + w_off + mi * 512);
      // signed INT8 weights (the level 2 with its XOR: this kernel's mma.sync is s8 x s8)
      const wgmma::Level2 l =
          kG128 ? wgmma::level2_params(*reinterpret_cast<const uint32_t*>(stage + l2_off + mi * 32)) : wgmma::Level2{};
      uint32_t a[8];
      wgmma::unpack8<kG128>(wv.x, l, a[0], a[1]);
      wgmma::unpack8<kG128>(wv.y, l, a[2], a[3]);
      wgmma::unpack8<kG128>(wv.z, l, a[4], a[5]);
      wgmma::unpack8<kG128>(wv.w, l, a[6], a[7]);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        ptx::mma_s8_16832(acc[mi][ni], a[0], a[1], a[2], a[3], xr[ni][0], xr[ni][1]);
        ptx::mma_s8_16832(acc[mi][ni], a[4], a[5], a[6], a[7], xr[ni][2], xr[ni][3]);
      }
    }
  }
  ptx::cp_async_wait<0>();
  // Dependents may be scheduled once every CTA is past its main loop. Not at
  // the start: several of these CTAs fit on an SM, so dependents (and theirs)
  // would become resident early and hold SM slots while they wait.
  ptx::pdl_trigger();

  // Fragment coordinates: acc[mi][ni][2h + e] is channel (.. + g + 8h), token (.. + 2q + e).
  const int g = lane >> 2, q = lane & 3;
  const int o_base = n16_base * 16 + warp_n * (Cfg::BN / Cfg::WARPS_N) + g;
  const int t_base = m_base + warp_m * (Cfg::BM / Cfg::WARPS_M) + 2 * q;

  // Visits this thread's accumulators inside the output: f(value, index in [m, n]).
  auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int o = o_base + mi * 16 + 8 * (e >> 1), t = t_base + ni * 8 + (e & 1);
          if (o < p.n && t < p.m) f(acc[mi][ni][e], static_cast<size_t>(t) * p.n + o);
        }
  };

  if (p.splits > 1) {
    // Split-K fix-up: every split stores its partial sums; the last CTA of the
    // tile to arrive adds the others' and runs the epilogue.
    int32_t* mine = p.partials + static_cast<size_t>(split) * p.m * p.n;
    for_each_output([&](int32_t& v, size_t idx) { __stcg(mine + idx, v); });
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      int* counter = p.counters + blockIdx.y * gridDim.x + blockIdx.x;
      const int arrived = atomicAdd(counter, 1);
      s_is_last = arrived == p.splits - 1;
      if (s_is_last) *counter = 0;  // every split has arrived: reset for the next launch
    }
    __syncthreads();
    if (!s_is_last) return;
    __threadfence();
    for (int z = 0; z < p.splits; ++z) {
      if (z == split) continue;
      const int32_t* other = p.partials + static_cast<size_t>(z) * p.m * p.n;
      for_each_output([&](int32_t& v, size_t idx) { v += __ldcg(other + idx); });
    }
  }

  if (p.acc_out) {  // exact accumulators (tests)
    for_each_output([&](int32_t& v, size_t idx) { p.acc_out[idx] = v; });
    return;
  }
  // Every factor is loaded before the first store (y may alias them as far
  // as the compiler knows: loads between stores would wait one by one).
  float scale[MI][2], szero[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int o = min(o_base + mi * 16 + 8 * h, p.n16 * 16 - 1);
      scale[mi][h] = p.ch_scale[o];
      szero[mi][h] = kG128 ? 0.0f : p.ch_szero[o];
    }
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
    float sx[2], asum[2];  // this column tile's token factors, loaded before its stores
#pragma unroll
    for (int e1 = 0; e1 < 2; ++e1) {
      const int t = min(t_base + ni * 8 + e1, p.m - 1);
      sx[e1] = __half2float(p.s_x[t]);
      asum[e1] = kG128 ? 0.0f : __half2float(p.a_sum[t]);
    }
#pragma unroll
    for (int e1 = 0; e1 < 2; ++e1) {
      const int t = t_base + ni * 8 + e1;
      if (t >= p.m) continue;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int o = o_base + mi * 16 + 8 * h;
          if (o >= p.n) continue;
          const int32_t v = acc[mi][ni][2 * h + e1];
          p.y[static_cast<size_t>(t) * p.n + o] =
              __float2half_rn(kG128 ? quant::epilogue_g128(v, sx[e1], scale[mi][h])
                                    : quant::epilogue_per_channel(v, sx[e1], scale[mi][h], szero[mi][h], asum[e1]));
        }
    }
  }
}

}  // namespace qserve::cuda::w4a8
