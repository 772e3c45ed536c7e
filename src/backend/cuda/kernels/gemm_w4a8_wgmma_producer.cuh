// The TMA producer of the persistent, cluster and INT8-weight wgmma tiles
// (kernels/gemm_w4a8_wgmma_kernel.cuh; the producer-dequantizing tiles have
// their own, kernels/gemm_w4a8_wgmma_pd.cuh): per pipeline stage, once its
// `empty` barrier has passed, the activation box(es), the weights' bulk
// copies (or the INT8 weights' box) and g128's level-2 words, on the stage's
// `full` barrier, in the order the consumers walk the units
// (kernels/gemm_w4a8_wgmma_units.cuh).
#pragma once

#include <cstdint>

#include <cuda.h>

#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_timeline.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_units.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8::wgmma {

// Whether a second producer thread issues the activations (the register-A W4
// tiles but the multicast pairs; see produce_stages): the full barriers then
// count two arrivals a phase.
constexpr bool x_thread_issues(bool s8, bool pd, bool mc) { return !s8 && !pd && !mc; }

// Two issuing threads (kXThread: the register-A W4 tiles but the multicast pairs):
// thread 0 issues every stage's weights without waiting for the previous
// kernel (no kernel writes them), lane 0 of warp 1 the activations after
// that wait, each thread a stage once its `empty` barrier has passed.
// Each thread's arrive.expect_tx on the stage's `full` barrier (two
// arrivals a phase) counts its own copies. The TMA unit takes
// copies from both threads, so stage 0's activations do not queue behind
// every prefetched stage's weights: with one thread issuing all STAGES
// stages' weights before the wait (at ~140 ns a copy in the TMA unit,
// bench/results/2026-11-30-stream-h200.md), the first stage was complete
// 2.3-4.5 us after the CTA began (bench/results/2026-12-03-gemm-h200-r28.md).
// kS8 (weights possibly written by the previous kernel) and kMC (the
// activations multicast into both CTAs) keep one thread: the first STAGES
// stages' weights before the wait, their activations after it.
//
// Called by every producer thread; threads 0 and 32 issue, the others return.
// k64_total, kt_total: the kernel's 64- and 128-wide k block counts.
// The stages' layout is the kernel's: xs [STAGES][KD][BM][128 B], ws
// [STAGES][MT][KD][8 KB] (kS8: [STAGES][128 MT][128 B]), l2s [STAGES][MT][KD][64].
// kBN64 (the 64-channel cluster tiles, MT = 1): channel block n_blk of 64 is
// half n_blk % 2 of 128-channel block n_blk / 2 (its 16-channel tiles 4
// (n_blk % 2) .. + 3: bytes [(n_blk % 2) 2 KB, + 2 KB) of each 4-KB k64
// half), copied into the same bytes of the stage's 8-KB block slots; g128:
// the 128-channel block's level-2 words whole, as for MT = 1 (the consumer
// reads its four tiles' words among them).
template <int BM, int MT, int STAGES, bool kG128, bool kS8, bool kCL, int KD, bool kSK, bool kMC, int OCC,
          bool kBN64 = false>
__device__ __forceinline__ void produce_stages(const CUtensorMap* x_map, const CUtensorMap* w_map, const Params& p,
                                               uint8_t* xs, uint8_t* ws, uint32_t* l2s, uint64_t* full,
                                               uint64_t* empty, int k64_total, int kt_total) {
  static_assert(!kBN64 || (MT == 1 && kCL && !kS8 && !kMC), "64-channel tiles: the cluster tiles of MT = 1");
  constexpr bool kXThread = x_thread_issues(kS8, false, kMC);
  constexpr TileShape kShape{BM, MT, STAGES, 1, kS8, false, kCL, KD, kMC, OCC, kG128, kBN64};
  constexpr int kXBytes = BM * 128, kWBytes = kShape.w_stage_bytes();
  constexpr int kXStage = KD * kXBytes, kWStage = KD * kWBytes, kL2Stage = KD * kShape.l2_stage_bytes();
  if (!(threadIdx.x == 0 || (kXThread && threadIdx.x == 32))) return;
  ptx::tma_prefetch_map(x_map);
  if constexpr (kS8) ptx::tma_prefetch_map(w_map);
  // A stage's activations: KD blocks from kt (a box may reach past the
  // split's blocks: unused; past k: zeros). Counted whole by TMA.
  auto issue_x_stage = [&](int s, int kt, int m_blk) {
    if constexpr (KD > 1 && !kMC) {
      // p.x_3d: the KD blocks as one box of the [k/128][m][128 B] view
      // (rows, then blocks: the layout of KD 2-D boxes; blocks past k zeros).
      if (p.x_3d) {
        ptx::tma_load_3d(xs + s * kXStage, x_map, 0, m_blk * BM, kt, &full[s]);
        return;
      }
    }
#pragma unroll
    for (int i = 0; i < KD; ++i) {
      if constexpr (kMC) {  // this CTA's half of the rows (its rank's), into both CTAs (the box: BM / 2 rows)
        const int half = static_cast<int>(blockIdx.x & 1) * (BM / 2);
        ptx::tma_load_2d_multicast(xs + s * kXStage + half * 128, x_map, kt * 128, m_blk * BM + half, &full[s],
                                   0x3);
      } else {
        ptx::tma_load_2d(xs + s * kXStage + i * kXBytes, x_map, (kt + i) * 128, m_blk * BM, &full[s]);
      }
    }
  };
  auto issue_x = [&](int count) {
    int i = 0;
    UnitWalk<kCL, kSK, kMC> walk(p, kt_total);
    Unit un;
    while (i < count && walk.next(p, kt_total, un))
      for (int kt = un.kb; kt < un.ke && i < count; kt += KD, ++i) issue_x_stage(i % STAGES, kt, un.m_blk);
  };
  if (kXThread && threadIdx.x == 32) {  // the activations
    ptx::pdl_wait();
    timeline_mark(p, kTlXAfterWait);
    int it = 0;
    UnitWalk<kCL, kSK, kMC> walk(p, kt_total);
    Unit un;
    while (walk.next(p, kt_total, un))
      for (int kt = un.kb; kt < un.ke; kt += KD, ++it) {
        const int s = it % STAGES;
        ptx::mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
        ptx::mbar_arrive_expect_tx(&full[s], kXStage);
        issue_x_stage(s, kt, un.m_blk);
      }
  } else {  // thread 0: the weights (one thread: and the activations)
    int it = 0;
    bool waited = false;  // (one thread) the activations may be issued
    if (kS8 && p.w_after_wait) {  // the weights are written by the previous kernel
      ptx::pdl_wait();
      waited = true;
    }
    UnitWalk<kCL, kSK, kMC> walk(p, kt_total);
    Unit un;
    while (walk.next(p, kt_total, un)) {
      const int m_blk = un.m_blk, n_blk = un.n_blk, kb = un.kb, ke = un.ke;
      for (int kt = kb; kt < ke; kt += KD, ++it) {
        const int s = it % STAGES;
        if (!kXThread && !waited && it == STAGES) {
          ptx::pdl_wait();
          waited = true;
          issue_x(STAGES);
        }
        // p.first_stages (two issuing threads, one CTA per SM: the
        // two-per-SM tiles' 80 registers would spill): the stages after
        // the first ones wait until stage 0 is complete, so that the first
        // stage's weights do not queue in DRAM behind every prefetched
        // stage of every CTA (round 41's timeline: the fill).
        if constexpr (kXThread && OCC == 1)
          if (p.first_stages > 0 && it == p.first_stages && it < STAGES) ptx::mbar_wait(&full[0], 0);
        ptx::mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1);
        if constexpr (kS8) {
          // The whole box is counted (rows past n, columns past k read as zeros).
          ptx::mbar_arrive_expect_tx(&full[s], kXBytes + kWBytes);
          if (waited) ptx::tma_load_2d(xs + s * kXBytes, x_map, kt * 128, m_blk * BM, &full[s]);
          ptx::tma_load_2d(ws + s * kWBytes, w_map, kt * 128, n_blk * MT * 128, &full[s]);
          continue;
        }
        // The stage's k64 halves: KD blocks, or fewer at the split's end;
        // the last block of k may be a half (k % 128 == 64: its second
        // half is computed on stale weights against the zeros TMA wrote
        // for the activations past k, as with KD = 1).
        const int halves = min(2 * KD, min(k64_total, 2 * ke) - 2 * kt), nblk = (halves + 1) / 2;
        if constexpr (kBN64) {
          // Half n_blk % 2 of 128-channel block n_blk / 2 (which exists:
          // n_blk < grid_n = ceil(n / 64)): 2 KB per k64 half, each copy to
          // where the half's 16-channel tiles sit in a 128-channel stage.
          const int blk = n_blk >> 1, off = (n_blk & 1) * 2048;
          ptx::mbar_arrive_expect_tx(&full[s],
                                     (kXThread ? 0 : kXStage) + halves * 2048 + (kG128 ? nblk * 256 : 0));
          if (!kXThread && waited) issue_x_stage(s, kt, m_blk);
          const uint8_t* src = p.w + (static_cast<size_t>(blk) * k64_total + 2 * kt) * 4096 + off;
          for (int h = 0; h < halves; ++h)
            ptx::tma_load_1d(ws + s * kWStage + h * 4096 + off, src + h * 4096, 2048, &full[s]);
          if (it == 0) timeline_mark(p, kTlFirstWeights);
          if constexpr (kG128)
            ptx::tma_load_1d(l2s + s * (kL2Stage / 4), p.level2 + quant::level2_word_offset(blk * 8, kt, p.groups),
                             nblk * 256, &full[s]);
          continue;
        }
        int blocks = 0;  // 128-channel blocks that exist (the last CTA column may have fewer)
#pragma unroll
        for (int b = 0; b < MT; ++b) blocks += n_blk * MT + b < p.blocks128;
        // g128: the level-2 words of groups kt.., 256 B per 128-channel block and group
        ptx::mbar_arrive_expect_tx(&full[s], (kXThread ? 0 : kXStage) + blocks * halves * 4096 +
                                                 (kG128 ? blocks * nblk * 256 : 0));
        if (!kXThread && waited) issue_x_stage(s, kt, m_blk);
        for (int b = 0; b < blocks; ++b) {
          const uint8_t* src = p.w + ((static_cast<size_t>(n_blk) * MT + b) * k64_total + 2 * kt) * 4096;
          ptx::tma_load_1d(ws + s * kWStage + b * KD * 8192, src, halves * 4096, &full[s]);
        }
        if (it == 0) timeline_mark(p, kTlFirstWeights);
        if constexpr (kG128)
          for (int b = 0; b < blocks; ++b)
            ptx::tma_load_1d(l2s + s * (kL2Stage / 4) + b * KD * 64,
                             p.level2 + quant::level2_word_offset((n_blk * MT + b) * 8, kt, p.groups), nblk * 256,
                             &full[s]);
      }
    }
    if (!kXThread && !waited) {
      ptx::pdl_wait();
      issue_x(it);
    }
  }
}

}  // namespace qserve::cuda::w4a8::wgmma
