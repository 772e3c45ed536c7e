// The producer of the producer-dequantizing tiles (kPD in
// kernels/gemm_w4a8_wgmma_kernel.cuh; docs/gemm-hopper.md): the weights are
// read once, at 4 bits, and turned into INT8 in shared memory by the
// producer warpgroup, so that the consumers run the INT8-weight tiles' short
// loop (both wgmma operands in shared memory) without a separate
// dequantization pass over the weights.
//
// Per 128-wide k stage (a ring of STAGES: X and the W4 staging; the INT8 A
// tiles in two slots apart):
//   thread 0 waits for the stage's `empty` (the 8 consumer warps are done
//     with X, the 4 producer warps with the W4 staging), then issues one TMA
//     box of X and one bulk copy per 128-channel block (8 KB of the repacked
//     W4 layout) on the stage's `full`, STAGES - 1 stages ahead of the
//     dequantization (the copies of stage j + STAGES - 1 right after the
//     dequantization of stage j, whose wait needs only stages already full);
//   all 128 threads wait for `full` and for the A slot's `aempty`, unpack
//     (+ level-2 dequantize) the W4 words exactly as the W4 consumers do
//     (unpack8) and store the INT8 rows into the A slot [128 MT rows][128 B]
//     in the 128-B swizzle that TMA would write (16-B chunk c of row r at
//     c ^ (r & 7)); each thread fences its writes to the async proxy and
//     arrives on `afull`; each warp then releases the W4 staging on `empty`.
// (A first layout with the A tile inside each stage, 3 stages deep, `full`
// counting the 128 writers, aborted on the H200 in the cases where a CTA ran
// more stages than the ring holds; cause not found, not kept:
// bench/results/2026-11-30-gemm-h200-r5.md.)
//
// Lane L of producer warp w handles, per 128-channel block b, the 16 x 64
// tiles tib = w and w + 4 of both k64 halves: 16 B each (rows g = L / 4 and
// g + 8 of the tile, k 16 v + 4 (L % 4) + byte for word v), stored as eight
// 4-byte pieces; the 32 lanes of one store hit 32 distinct banks (row & 7 =
// g selects the chunk, L % 4 the word).
#pragma once

#include <cstdint>

#include <cuda.h>

#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8::wgmma {

// The persistent CTA's sequence of (work unit, k stage), as the consumers walk it.
// (Three registers: the blocks are derived when needed, the producer is short of registers.)
struct StageWalk {
  int u, kt, ke;
  __device__ __forceinline__ void set(const Params& p, int kt_total) {
    if (u >= p.units) return;
    kt = u / p.grid_m / p.grid_n * p.kt_per_split;
    ke = min(kt_total, kt + p.kt_per_split);
  }
  __device__ __forceinline__ bool valid(const Params& p) const { return u < p.units; }
  __device__ __forceinline__ int n_blk(const Params& p) const { return u / p.grid_m % p.grid_n; }
  __device__ __forceinline__ int m_blk(const Params& p) const { return u % p.grid_m; }
  __device__ __forceinline__ void next(const Params& p, int kt_total) {
    if (++kt == ke) {
      u += gridDim.x;
      set(p, kt_total);
    }
  }
};

// One stage's dequantization by the 128 producer threads: the W4 staging
// `src` [MT][2 k64 halves][8 tiles][32 lanes][16 B] -> the INT8 A tile `dst`
// [128 MT rows][128 B] (128-B swizzle). The level-2 entries are loaded before
// wait() (which waits for the stage's data), block 1's at the end of block 0.
template <int MT, bool kG128, class Wait>
__device__ __forceinline__ void dequant_stage(const Params& p, const StageWalk& dc, const uint8_t* src, uint8_t* dst,
                                              Wait wait) {
  const int k64_total = p.k >> 6;
  const int ptid = threadIdx.x & 127, pwarp = ptid >> 5, lane = ptid & 31, g = lane >> 2, q = lane & 3;
  const int n_blk = dc.n_blk(p);
  auto level2_of = [&](int b, int tt) {  // rows g, g + 8 of tile pwarp + 4 tt of block b, group kt (g128)
    const int t16 = (n_blk * MT + b) * 8 + pwarp + 4 * tt;
    return kG128 && t16 < p.n16 ? __ldg(p.level2 + quant::level2_word_offset(t16, dc.kt, p.groups) + g)
                                : 0x00010001u;
  };
  uint32_t e0 = level2_of(0, 0), e1 = level2_of(0, 1);
  const int halves = min(2, k64_total - 2 * dc.kt);
  wait();
  // (The loops over blocks and tiles are not unrolled: the producer has few registers.)
#pragma unroll 1
  for (int b = 0; b < MT; ++b) {
    // A block past n: its rows' outputs are dropped by the epilogue, the
    // buffer keeps whatever it held.
    if (n_blk * MT + b >= p.blocks128) continue;
#pragma unroll 1
    for (int tt = 0; tt < 2; ++tt) {
      const int tib = pwarp + 4 * tt;
      const Level2 l = kG128 ? level2_params(tt == 0 ? e0 : e1) : Level2{};
      uint8_t* row_g = dst + (b * 128 + tib * 16 + g) * 128 + 4 * q;  // row g; row g + 8 is 1024 B on
#pragma unroll 1
      for (int h = 0; h < 2; ++h) {
        uint32_t lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};  // k past the end: zeros
        if (h < halves) {
          const uint4 v = *reinterpret_cast<const uint4*>(src + b * 8192 + h * 4096 + tib * 512 + lane * 16);
          unpack8<kG128>(v.x, l, lo[0], hi[0]);
          unpack8<kG128>(v.y, l, lo[1], hi[1]);
          unpack8<kG128>(v.z, l, lo[2], hi[2]);
          unpack8<kG128>(v.w, l, lo[3], hi[3]);
        }
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const int off = ((4 * h + w) ^ g) * 16;
          *reinterpret_cast<uint32_t*>(row_g + off) = lo[w];
          *reinterpret_cast<uint32_t*>(row_g + 1024 + off) = hi[w];
        }
      }
    }
    if (b + 1 < MT) e0 = level2_of(b + 1, 0), e1 = level2_of(b + 1, 1);
  }
}

// Thread 0's copies of stage j (ring slot j % STAGES) after waiting for the
// slot's `empty`: the W4 blocks that exist (the last CTA column may have
// fewer) into the staging `w4s` on `wbar` (its one arrival expecting
// `extra` bytes more: the X box when it completes on the same barrier).
template <int MT, int STAGES>
__device__ __forceinline__ void issue_w4(const Params& p, int j, const StageWalk& c, const uint8_t* w4s,
                                         uint64_t* empty, uint64_t* wbar, uint32_t extra) {
  const int k64_total = p.k >> 6, s = j % STAGES;
  ptx::mbar_wait(&empty[s], ((j / STAGES) & 1) ^ 1);
  const int halves = min(2, k64_total - 2 * c.kt);
  int blocks = 0;
#pragma unroll
  for (int b = 0; b < MT; ++b) blocks += c.n_blk(p) * MT + b < p.blocks128;
  ptx::mbar_arrive_expect_tx(&wbar[s], extra + blocks * halves * 4096);
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* src = p.w + ((static_cast<size_t>(c.n_blk(p)) * MT + b) * k64_total + 2 * c.kt) * 4096;
    ptx::tma_load_1d(const_cast<uint8_t*>(w4s) + s * MT * 8192 + b * 8192, src, halves * 4096, &wbar[s]);
  }
}

// The producer: the TMA ring (X and the W4 staging, STAGES deep, `full`
// expecting both, `empty` released by the 8 consumer warps and the 4
// producer warps) and two INT8 A slots (`afull`: the 128 writers, `aempty`:
// the 8 consumer warps). The loads run STAGES - 1 stages ahead of the
// dequantization, which runs at most one stage ahead of the consumers.
template <int BM, int MT, int STAGES, bool kG128>
__device__ __forceinline__ void produce_dequantized(const CUtensorMap* x_map, const Params& p, uint8_t* xs,
                                                    uint8_t* ws, const uint8_t* w4s, uint64_t* full, uint64_t* empty,
                                                    uint64_t* afull, uint64_t* aempty) {
  constexpr int kXBytes = BM * 128, kWBytes = MT * 16384;
  const int kt_total = ((p.k >> 6) + 1) >> 1;
  const int ptid = threadIdx.x, lane = ptid & 31;
  auto issue_x = [&](int j, const StageWalk& c) {
    const int s = j % STAGES;
    ptx::tma_load_2d(xs + s * kXBytes, x_map, c.kt * 128, c.m_blk(p) * BM, &full[s]);
  };
  StageWalk ic{static_cast<int>(blockIdx.x)};
  ic.set(p, kt_total);
  StageWalk dc = ic;
  if (ptid == 0) {
    int issued = 0;
    StageWalk c0 = ic;
    for (; issued < STAGES - 1 && ic.valid(p); ++issued, ic.next(p, kt_total))
      issue_w4<MT, STAGES>(p, issued, ic, w4s, empty, full, kXBytes);
    ptx::pdl_wait();
    for (int j = 0; j < issued; ++j, c0.next(p, kt_total)) issue_x(j, c0);
  }
  for (int it = 0; dc.valid(p); ++it, dc.next(p, kt_total)) {
    const int s = it % STAGES, a = it & 1;
    dequant_stage<MT, kG128>(p, dc, w4s + s * MT * 8192, ws + a * kWBytes, [&] {
      ptx::mbar_wait(&full[s], (it / STAGES) & 1);
      ptx::mbar_wait(&aempty[a], ((it >> 1) & 1) ^ 1);
    });
    ptx::fence_proxy_async_shared();
    ptx::mbar_arrive(&afull[a]);
    __syncwarp();
    if (lane == 0) ptx::mbar_arrive(&empty[s]);  // this warp is done with the W4 staging
    if (ptid == 0 && ic.valid(p)) {  // (ic valid: the prologue issued STAGES - 1 stages)
      issue_w4<MT, STAGES>(p, it + STAGES - 1, ic, w4s, empty, full, kXBytes);
      issue_x(it + STAGES - 1, ic);
      ic.next(p, kt_total);
    }
  }
}

}  // namespace qserve::cuda::w4a8::wgmma
