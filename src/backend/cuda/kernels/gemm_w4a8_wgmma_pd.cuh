// The producer of the producer-dequantizing tiles (kPD in
// kernels/gemm_w4a8_wgmma_kernel.cuh; docs/gemm-hopper.md): the weights are
// read once, at 4 bits, and turned into INT8 in shared memory by the
// producer warpgroup, so that the consumers run the INT8-weight tiles' short
// loop (both wgmma operands in shared memory) without a separate
// dequantization pass over the weights.
//
// Per 128-wide k stage s (STAGES of them in a ring):
//   thread 0 waits `empty[s]`, then issues the stage's W4 weights (one bulk
//     copy per 128-channel block, 8 KB, into the staging ring `w4s`, on
//     `wfull[s]`) and its activations (TMA box, on `full[s]`), STAGES - 1
//     stages ahead of the dequantization;
//   all 128 threads wait `wfull[s]`, unpack (+ level-2 dequantize) the W4
//     words exactly as the W4 consumers do (unpack8) and store the INT8 rows
//     into the stage's A tile [128 MT rows][128 B] in the 128-B swizzle that
//     TMA would write (16-B chunk c of row r at c ^ (r & 7)); then each
//     thread fences its writes to the async proxy and arrives on `full[s]`
//     (count 1 + 128: thread 0's expect-tx arrival and the 128 writers).
// The staging slot of a stage is free when the stage is: the writers read
// it before they arrive on `full`, the consumers release the stage after.
// Issuing stage j + STAGES - 1 right after the dequantization of stage j
// waits for the consumers to release stage j - 1, which needs only stages
// that are already full: no cycle.
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

template <int BM, int MT, int STAGES, bool kG128>
__device__ __forceinline__ void produce_dequantized(const CUtensorMap* x_map, const Params& p, uint8_t* xs,
                                                    uint8_t* ws, const uint8_t* w4s, uint64_t* full, uint64_t* empty,
                                                    uint64_t* wfull) {
  constexpr int kXBytes = BM * 128, kWBytes = MT * 16384, kW4Bytes = MT * 8192;
  const int k64_total = p.k >> 6, kt_total = (k64_total + 1) >> 1;
  const int ptid = threadIdx.x, pwarp = ptid >> 5, lane = ptid & 31, g = lane >> 2, q = lane & 3;

  auto issue_w = [&](int j, const StageWalk& c) {
    const int s = j % STAGES;
    ptx::mbar_wait(&empty[s], ((j / STAGES) & 1) ^ 1);
    const int halves = min(2, k64_total - 2 * c.kt);
    int blocks = 0;  // 128-channel blocks that exist (the last CTA column may have fewer)
#pragma unroll
    for (int b = 0; b < MT; ++b) blocks += c.n_blk(p) * MT + b < p.blocks128;
    ptx::mbar_arrive_expect_tx(&wfull[s], blocks * halves * 4096);
    for (int b = 0; b < blocks; ++b) {
      const uint8_t* src = p.w + ((static_cast<size_t>(c.n_blk(p)) * MT + b) * k64_total + 2 * c.kt) * 4096;
      ptx::tma_load_1d(const_cast<uint8_t*>(w4s) + s * kW4Bytes + b * 8192, src, halves * 4096, &wfull[s]);
    }
  };
  auto issue_x = [&](int j, const StageWalk& c) {
    const int s = j % STAGES;
    ptx::mbar_arrive_expect_tx(&full[s], kXBytes);
    ptx::tma_load_2d(xs + s * kXBytes, x_map, c.kt * 128, c.m_blk(p) * BM, &full[s]);
  };

  StageWalk ic{static_cast<int>(blockIdx.x)};
  ic.set(p, kt_total);
  StageWalk dc = ic;
  int issued = 0;
  if (ptid == 0) {
    // The weights of the first stages before the dependency wait (no kernel
    // writes them), their activations after it.
    StageWalk c0 = ic;
    for (; issued < STAGES - 1 && ic.valid(p); ++issued, ic.next(p, kt_total)) issue_w(issued, ic);
    ptx::pdl_wait();
    for (int j = 0; j < issued; ++j, c0.next(p, kt_total)) issue_x(j, c0);
  }
  for (int it = 0; dc.valid(p); ++it, dc.next(p, kt_total)) {
    const int s = it % STAGES;
    // The level-2 entries of rows g, g + 8 of this thread's tiles of block 0,
    // group kt (g128), loaded before the wait; block 1's at the end of block 0.
    auto level2_of = [&](int b, int tt) {
      const int t16 = (dc.n_blk(p) * MT + b) * 8 + pwarp + 4 * tt;
      return kG128 && t16 < p.n16 ? __ldg(p.level2 + (static_cast<size_t>(t16) * p.groups + dc.kt) * 8 + g)
                                  : 0x00010001u;
    };
    uint32_t e0 = level2_of(0, 0), e1 = level2_of(0, 1);
    const int halves = min(2, k64_total - 2 * dc.kt);
    ptx::mbar_wait(&wfull[s], (it / STAGES) & 1);
    const uint8_t* src = w4s + s * kW4Bytes;
    uint8_t* dst = ws + s * kWBytes;
#pragma unroll 1
    for (int b = 0; b < MT; ++b) {
      // A block past n: its rows' outputs are dropped by the epilogue, the
      // stage keeps whatever it held.
      if (dc.n_blk(p) * MT + b >= p.blocks128) continue;
#pragma unroll 1
      for (int tt = 0; tt < 2; ++tt) {
        const int tib = pwarp + 4 * tt;
        const Level2 l = kG128 ? level2_params(tt == 0 ? e0 : e1) : Level2{};
        uint8_t* row_g = dst + (b * 128 + tib * 16 + g) * 128 + 4 * q;  // row g; row g + 8 is 1024 B on
#pragma unroll
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
    ptx::fence_proxy_async_shared();
    ptx::mbar_arrive(&full[s]);
    if (ptid == 0 && ic.valid(p)) {
      issue_w(issued, ic);
      issue_x(issued, ic);
      ++issued;
      ic.next(p, kt_total);
    }
  }
}

}  // namespace qserve::cuda::w4a8::wgmma
