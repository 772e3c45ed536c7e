// The W4A8 decode kernels for 9 <= m <= 64 tokens (docs/gemm-hopper.md,
// "Decode at m = 16-64: 128-channel tiles, k split over a cluster"): the
// decode kernels' weights-into-registers stream (gemm_w4a8_gemv.cuh) with
// CTA tiles of 128 channels, so that the activations a CTA reads are no
// more than its weights at m = 32 (the 16-channel tiles of gemv16 read m / 8
// times the weights' bytes of activations through L2).
//
// A CTA takes one 128-channel tile (blockIdx.x / splits) and one contiguous
// range of its k64 blocks (split blockIdx.x % splits, an even count: whole
// g128 groups); its warps (8 of one 16-channel slice, or 4 of two: kWarps x
// kPerWarp = 8) multiply their slices over every block of the range. A lane
// reads a block's 16 bytes per slice of the repacked compute order
// (quant/w4a8_repack.h: [n / 128][k / 64][8 tiles][32 lanes][16 B]: a CTA
// reads 4 KB contiguous per block), which unpack to the mma.sync m16n8k32 A
// fragments of the block's two k32 steps; one mma.sync per k32 step, slice
// and 8-token group (kNT groups).
//
// The activations: one shared-memory ring per CTA, kRingSlots chunks of
// kChunk blocks x kNT groups x 8 rows x 64 B (the pieces of row r at piece ^
// ((r / 2) % 4), as gemv's rings: ldmatrix phases without bank conflicts).
// All threads copy a chunk (cp.async, 16 B each; 4 kChunk threads per row
// of a chunk: its contiguous bytes); one block barrier per chunk makes it visible
// and frees the slot the copies two chunks ahead go into. Rows at or past m
// are zeroed once and never copied. Each warp's B fragments come from the
// ring by ldmatrix.x4 (a block's four B registers of one 8-token group).
//
// The weights of a warp's chunks sit in kAhead + 1 register slots (the
// chunk being multiplied, the next kAhead in flight), compile-time indices
// (the chunk loop is unrolled by the slot count): no register copies.
//
// Measured no faster than the planner's plans (bench/results/
// 2026-11-30-gemm-h200-r15.md): tiles that a plan may force, not planned.
//
// Split-K (splits > 1): the CTAs of a tile form a thread block cluster
// (cluster x = splits); each stores its INT32 partials in its own shared
// memory (over the ring), and after a cluster barrier CTA r sums the slice r
// of the tile's outputs over the cluster (distributed shared memory) and
// applies the epilogue of quant/gemm_epilogue.h. Splits = 1: each warp
// applies the epilogue to its own accumulators. The sums are exact (INT32).
//
// Programmatic dependent launch: the weights (and g128 level-2 words) of a
// warp's first kAhead chunks are loaded before the dependency wait, the
// activations after it.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda_fp16.h>

#include "backend/cuda/gemm_w4a8_gemvc.h"
#include "backend/cuda/gemm_w4a8_launch.h"
#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "backend/cuda/kernels/mma_primitives.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "quant/gemm_epilogue.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8::gemvc {

inline constexpr int kSlices = kTileChannels / 16;  // 16-channel slices of a tile (one repacked block of 8)
inline constexpr int kRingSlots = 3;                 // chunk c computes while c + 1, c + 2 load
inline constexpr int kGroupBytes = 8 * 64;           // 8 token rows x 64 k
// The ring: kRingSlots chunks of kChunk blocks; the partials reuse it.
template <int kNT, int kChunk>
inline constexpr int kChunkBytes = kChunk * kNT * kGroupBytes;
// The partials of a CTA: [slice][group * 4 + accumulator register][lane] INT32.
template <int kNT>
inline constexpr int kPartialInts = kSlices * 4 * kNT * 32;
template <int kNT, int kChunk>
inline constexpr int kSmemBytes = kRingSlots * kChunkBytes<kNT, kChunk> > kPartialInts<kNT> * 4
                                      ? kRingSlots * kChunkBytes<kNT, kChunk>
                                      : kPartialInts<kNT> * 4;

__device__ __forceinline__ int piece_offset(int row, int piece) { return row * 64 + 16 * (piece ^ ((row >> 1) & 3)); }

// kWarps warps of kPerWarp 16-channel slices each (kWarps * kPerWarp = 8):
// a warp's slices share its B fragments (ldmatrix reads per MMA: 1 /
// kPerWarp).
template <bool kG128, int kNT, int kWarps, int kPerWarp, int kChunk, int kCtasPerSm, int kAhead>
__global__ void __launch_bounds__(32 * kWarps, kCtasPerSm) gemm_w4a8_gemvc_kernel(const KernelParams p) {
  static_assert(kAhead == 1 || kAhead == 2);
  static_assert(kWarps * kPerWarp == kSlices && (kChunk == 2 || kChunk == 4));
  constexpr int kThreads = 32 * kWarps;
  extern __shared__ __align__(128) unsigned char ring[];  // [kRingSlots][kChunk][kNT][8 rows][64 B]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int splits = p.splits;
  const int tile = blockIdx.x / splits, split = blockIdx.x - tile * splits;
  const int k64_total = p.k >> 6;
  // This CTA's k64 blocks kb0 .. kb0 + blocks - 1 (kt_per_split: 128-k
  // units per split; the last split may be shorter, none is empty).
  const int kb0 = 2 * p.kt_per_split * split;
  const int blocks = max(0, min(2 * p.kt_per_split, k64_total - kb0));
  const int chunks = max(1, (blocks + kChunk - 1) / kChunk);
  const int slice0 = warp * kPerWarp;  // this warp's first 16-channel slice (past n: padding, zero weights)

  constexpr int kSlots = kAhead + 1;
  uint4 w[kSlots][kChunk][kPerWarp];
  uint32_t l[kSlots][kChunk][kPerWarp];  // g128: the level-2 words of the blocks' groups (even i)
  const uint4* wt = p.w + static_cast<size_t>(tile) * k64_total * 256 + slice0 * 32 + lane;
  const uint32_t* l2t = p.level2 + (kG128 ? quant::level2_word_offset(tile * kSlices + slice0, 0, p.groups) + g : 0);
  // Chunk c's weights: block kb0 + c kChunk + i of slice slice0 + u for this
  // lane at wt[kb * 256 + u * 32] (level-2 words: l2t[group * 64 + u * 8]).
  auto load_chunk = [&](int c, uint4 (&wn)[kChunk][kPerWarp], uint32_t (&ln)[kChunk][kPerWarp]) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int bi = c * kChunk + i;
      if (bi < blocks) {
        const int kb = kb0 + bi;
#pragma unroll
        for (int u = 0; u < kPerWarp; ++u) {
          wn[i][u] = __ldg(wt + static_cast<size_t>(kb) * 256 + u * 32);
          if constexpr (kG128)
            if (i % 2 == 0) ln[i][u] = __ldg(l2t + (kb >> 1) * 64 + u * 8);  // (kb0, chunks even: i, i + 1 one group)
        }
      }
    }
  };
  // No kernel writes the weights: the first kAhead chunks load before the dependency wait.
#pragma unroll
  for (int d = 0; d < kAhead; ++d)
    if (d < chunks) load_chunk(d, w[d], l[d]);

  // Piece e of a chunk (kNT * kChunk * 32 of them): 16 B at row 8 j + r,
  // block i, k piece pq; the threads of a row copy its kChunk * 64
  // contiguous bytes.
  constexpr int kPieces = kNT * kChunk * 32;
  auto piece_pos = [](int e, int& pq, int& i, int& r, int& j) {
    pq = e & 3, i = (e >> 2) & (kChunk - 1), r = (e / (4 * kChunk)) & 7, j = e / (32 * kChunk);
  };
  auto piece_dst = [](int pq, int i, int r, int j) { return (i * kNT + j) * kGroupBytes + piece_offset(r, pq); };
  // Rows at or past m stay zero in every slot.
  for (int s = 0; s < kRingSlots; ++s)
    for (int e = threadIdx.x; e < kPieces; e += kThreads) {
      int pq, i, r, j;
      piece_pos(e, pq, i, r, j);
      if (8 * j + r >= p.m)
        *reinterpret_cast<uint4*>(ring + s * kChunkBytes<kNT, kChunk> + piece_dst(pq, i, r, j)) = make_uint4(0, 0, 0, 0);
    }

  // The epilogue's factors, loaded while the main loop runs (the first of
  // its block barriers publishes them): the tile's channel factors (no
  // kernel writes them) before the dependency wait, the tokens' after it.
  __shared__ float ep_ch[2][kTileChannels];  // [scale | scaled zero][channel of the tile]
  __shared__ float ep_tok[2][8 * kNT];       // [s_x | a_sum][token]
  static_assert(sizeof(ep_ch) + sizeof(ep_tok) <= 2 * 1024, "the launcher's shared-memory budget");
  if (!p.acc_out)
    for (int t = threadIdx.x; t < kTileChannels; t += kThreads) {
      const int o = tile * kTileChannels + t;
      if (o < p.n) {
        ep_ch[0][t] = p.ch_scale[o];
        if constexpr (!kG128) ep_ch[1][t] = p.ch_szero[o];
      }
    }

  ptx::pdl_trigger();
  ptx::pdl_wait();  // X, s_x, a_sum come from the previous kernel; y may be read by it

  if (!p.acc_out)
    for (int t = threadIdx.x; t < 8 * kNT && t < p.m; t += kThreads) {
      ep_tok[0][t] = __half2float(p.s_x[t]);
      if constexpr (!kG128) ep_tok[1][t] = __half2float(p.a_sum[t]);
    }

  // Chunk c's activations into its ring slot; one commit group per call
  // (empty past the last chunk).
  auto copy_x = [&](int c) {
    if (c < chunks) {
      unsigned char* slot = ring + (c % kRingSlots) * kChunkBytes<kNT, kChunk>;
      for (int e = threadIdx.x; e < kPieces; e += kThreads) {
        int pq, i, r, j;
        piece_pos(e, pq, i, r, j);
        const int row = 8 * j + r, bi = c * kChunk + i;
        if (row < p.m && bi < blocks)
          ptx::cp_async16_ca(slot + piece_dst(pq, i, r, j),
                             p.x + static_cast<size_t>(row) * p.k + (kb0 + bi) * 64 + 16 * pq);
      }
    }
    ptx::cp_async_commit();
  };
  // ldmatrix.x4 row addresses: lanes 8 i .. 8 i + 7 give rows 0..7 of piece i
  // (k 16 i ..): register i of lane (g, q) = X[row g][16 i + 4 q ..], the B
  // fragments {b0, b1} of k32 step 0, then of step 1.
  const int ld_offset = piece_offset(lane & 7, lane >> 3);

  int32_t acc[kPerWarp][kNT][4] = {};
  auto mma_block = [&](const uint4 (&ws)[kChunk][kPerWarp], const uint32_t (&ls)[kChunk][kPerWarp], int i,
                       const uint32_t (&b)[kNT][4], wgmma::Level2 (&lp)[kPerWarp]) {
#pragma unroll
    for (int u = 0; u < kPerWarp; ++u) {
      if constexpr (kG128)
        if (i % 2 == 0) lp[u] = wgmma::level2_params(ls[i][u]);
      const uint4& wi = ws[i][u];
      uint32_t a[8];
      wgmma::unpack8<kG128>(wi.x, lp[u], a[0], a[1]);
      wgmma::unpack8<kG128>(wi.y, lp[u], a[2], a[3]);
      wgmma::unpack8<kG128>(wi.z, lp[u], a[4], a[5]);
      wgmma::unpack8<kG128>(wi.w, lp[u], a[6], a[7]);
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        ptx::mma_s8_16832(acc[u][j], a[0], a[1], a[2], a[3], b[j][0], b[j][1]);
        ptx::mma_s8_16832(acc[u][j], a[4], a[5], a[6], a[7], b[j][2], b[j][3]);
      }
    }
  };
  // Chunk c from weight slot kS.
  auto step = [&](auto slot, int c) {
    constexpr int kS = decltype(slot)::value;
    if (c + kAhead < chunks) load_chunk(c + kAhead, w[(kS + kAhead) % kSlots], l[(kS + kAhead) % kSlots]);
    ptx::cp_async_wait<1>();  // this thread's copies of chunk c ...
    __syncthreads();          // ... and everyone's; everyone is done with chunk c - 1's slot
    copy_x(c + 2);            // into chunk c - 1's slot
    const unsigned char* rs = ring + (c % kRingSlots) * kChunkBytes<kNT, kChunk>;
    wgmma::Level2 lp[kPerWarp]{};
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      if (c * kChunk + i >= blocks) break;
      uint32_t b[kNT][4];
#pragma unroll
      for (int j = 0; j < kNT; ++j) ptx::ldmatrix_x4(b[j], rs + (i * kNT + j) * kGroupBytes + ld_offset);
      mma_block(w[kS], l[kS], i, b, lp);
    }
  };

  copy_x(0);
  copy_x(1);
  for (int c = 0; c < chunks; c += kSlots)
    [&]<int... kI>(std::integer_sequence<int, kI...>) {
      ((c + kI < chunks ? step(std::integral_constant<int, kI>{}, c + kI) : void()), ...);
    }(std::make_integer_sequence<int, kSlots>{});
  ptx::cp_async_wait<0>();  // (only empty groups can be left)

  // Output of accumulator r of lane ln in group j of slice sl: channel tile
  // * 128 + 16 sl + ln / 4 + 8 (r / 2), token 8 j + 2 (ln % 4) + r % 2.
  auto store = [&](int sl, int j, int r, int ln, int32_t v) {
    const int o = tile * kTileChannels + 16 * sl + (ln >> 2) + 8 * (r >> 1), tok = 8 * j + 2 * (ln & 3) + (r & 1);
    if (o >= p.n || tok >= p.m) return;
    const size_t idx = static_cast<size_t>(tok) * p.n + o;
    if (p.acc_out) {
      p.acc_out[idx] = v;
      return;
    }
    const int c = o - tile * kTileChannels;
    const float f = kG128 ? quant::epilogue_g128(v, ep_tok[0][tok], ep_ch[0][c])
                          : quant::epilogue_per_channel(v, ep_tok[0][tok], ep_ch[0][c], ep_ch[1][c], ep_tok[1][tok]);
    p.y[idx] = __float2half_rn(f);
  };
  if (splits == 1) {
#pragma unroll
    for (int u = 0; u < kPerWarp; ++u)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) store(slice0 + u, j, r, lane, acc[u][j][r]);
    return;
  }
  // Split-K: the partials over the ring (every warp is past its last ldmatrix).
  __syncthreads();
  int32_t* part = reinterpret_cast<int32_t*>(ring);
#pragma unroll
  for (int u = 0; u < kPerWarp; ++u)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) part[((slice0 + u) * 4 * kNT + 4 * j + r) * 32 + lane] = acc[u][j][r];
  ptx::cluster_sync();  // every CTA's partials in place
  // Slice `split` of the tile's partials (16-B pieces of 4 lanes), summed over the cluster.
  constexpr int kQuads = kPartialInts<kNT> / 4;
  const int begin = split * kQuads / splits, end = (split + 1) * kQuads / splits;
  const uint32_t base = ptx::smem_addr(part);
  for (int e4 = begin + static_cast<int>(threadIdx.x); e4 < end; e4 += kThreads) {
    int32_t v[4] = {0, 0, 0, 0};
    for (int z = 0; z < splits; ++z) {
      const int4 s = ptx::ld_shared_cluster_v4(ptx::map_shared_rank(base + 16 * e4, static_cast<uint32_t>(z)));
      v[0] += s.x, v[1] += s.y, v[2] += s.z, v[3] += s.w;
    }
    const int e = 4 * e4, ln = e & 31, jr = (e >> 5) % (4 * kNT), sl = (e >> 5) / (4 * kNT);
#pragma unroll
    for (int t = 0; t < 4; ++t) store(sl, jr >> 2, jr & 3, ln + t, v[t]);
  }
  ptx::cluster_sync();  // no CTA leaves while another may still read its partials
}

}  // namespace qserve::cuda::w4a8::gemvc
