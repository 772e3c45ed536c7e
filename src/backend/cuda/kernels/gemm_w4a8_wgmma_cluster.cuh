// The cluster tiles' split-K reduction and epilogue (kernels/gemm_w4a8_wgmma_kernel.cuh,
// kCL): the p.splits CTAs of one cluster computed the same output tile
// [BM tokens][128 MT channels] over different k ranges. Each CTA stores its
// partial tile in its own shared memory; after a cluster barrier, CTA r sums
// slice r of the tile (16-B pieces, row-major) over every CTA of the cluster,
// its own partial through ordinary shared loads and the others' through
// distributed shared memory (ld.shared::cluster, even to the CTA's own rank,
// ran at a fraction of the local rate: 128 x 128 unsplit spent ~7,100 cycles
// in this epilogue against ~4,800 now, bench/results/2026-12-03-gemm-h200-r28.md),
// ranks r, r + 1, ... (the sums are exact integers in any order), applies the
// epilogue and stores fp16 outputs (or the exact sums, p.acc_out). A second
// cluster barrier (a relaxed arrival) keeps every CTA's shared memory alive
// until all slices have been read. Unsplit (a cluster of one: only with
// QSERVE_W4A8_UNSPLIT_TWINS=0, since unsplit plans run the tile's twin with
// the staged epilogue) a barrier among the consumers replaces both.
//
// Against the global split-K fix-up (INT32 partials [splits][m][n] written,
// a counter, the last CTA reading the others' back), the partial tiles never
// leave the SMs: no round trip through L2 on the critical path, no
// workspace, and the reduction and the stores are spread over all CTAs of
// the tile instead of the last one.
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "quant/gemm_epilogue.h"

namespace qserve::cuda::w4a8::wgmma {

// Called by the 256 consumer threads (ctid 0..255) of every CTA of the
// cluster, once per CTA, after a barrier among them that ends their use of
// the stages (kBN64, the 64-channel tiles: by consumer warpgroup 0's 128,
// cw = 0; warpgroup 1 takes part in the cluster barriers only,
// cluster_reduce_barriers_only): `smem` (the stages) then holds, per
// cluster_reduce_bytes(), with kCh = 128 MT channels (kBN64: 64):
//   part  [BM][cluster_row_ints(kCh)] int32  this CTA's partial tile
//   ch_f  [2][kCh] f32                       channel scale, scaled zero
//   tok_f [BM][2] f32                        per-token s_x, a_sum (g128: the code sum's bits)
// acc[j][4 i + 2 h + e]: channel (cw MT + j) 64 + warp 16 + g + 8 h of the
// tile, token 8 i + 2 q + e (the wgmma D fragment of m64 tile j). The
// factors (scale, szero: this thread's channels; tok_*: tokens wtid + 128 r)
// were loaded at the tile's start (not when p.acc_out).
// The reduction's last cluster barrier, for every thread of the cluster: no
// CTA leaves while another may still read its partial tile. Every value a
// summing thread loaded has been used by then, so a relaxed arrival (no
// fence: the stores need not complete first) is enough. Unsplit: none.
__device__ __forceinline__ void cluster_reduce_leave(int splits) {
  if (splits > 1) {
    ptx::cluster_arrive_relaxed();
    ptx::cluster_wait();
  }
}
// The cluster barriers of cluster_reduce_epilogue, for the threads of a CTA
// that take no part in the sum (the producer warpgroup): both, in its order.
__device__ __forceinline__ void cluster_reduce_barriers_only(int splits) {
  if (splits > 1) ptx::cluster_sync();
  cluster_reduce_leave(splits);
}

template <int BM, int MT, bool kG128, int TPT, int kLoads, bool kBN64 = false>
__device__ __forceinline__ void cluster_reduce_epilogue(const Params& p, uint8_t* smem, const int32_t (&acc)[MT][BM / 2],
                                                        const float (&scale)[MT][2], const float (&szero)[MT][2],
                                                        const float (&tok_sx)[TPT], const float (&tok_asum)[TPT],
                                                        int cw, int warp, int g, int q, int ctid, int m_blk,
                                                        int n_blk) {
  static_assert(!kBN64 || MT == 1, "64-channel tiles: one m64 tile");
  // kCh channels of the tile, held by kThr consumer threads.
  constexpr int kCh = kBN64 ? 64 : 128 * MT, kThr = kBN64 ? 128 : 256, kRow = cluster_row_ints(kCh);
  int32_t* part = reinterpret_cast<int32_t*>(smem);
  float* ch_f = reinterpret_cast<float*>(part + BM * kRow);
  float* tok_f = ch_f + 2 * kCh;
  const int wtid = ctid & 127;
  const int splits = p.splits;

  // 1. This CTA's partial tile and the tile's factors into its shared memory.
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const int col0 = (cw * MT + j) * 64 + warp * 16 + g;
#pragma unroll
    for (int i = 0; i < BM / 8; ++i)
#pragma unroll
      for (int e4 = 0; e4 < 4; ++e4)
        part[(8 * i + 2 * q + (e4 & 1)) * kRow + col0 + 8 * (e4 >> 1)] = acc[j][4 * i + e4];
  }
  if (!p.acc_out) {
    if (q == 0)
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int col = (cw * MT + j) * 64 + warp * 16 + g + 8 * h;
          ch_f[col] = scale[j][h];
          ch_f[kCh + col] = szero[j][h];
        }
    if (cw == 0)
#pragma unroll
      for (int r = 0; r < TPT; ++r)
        if (wtid + 128 * r < BM)
          *reinterpret_cast<float2*>(tok_f + 2 * (wtid + 128 * r)) = make_float2(tok_sx[r], tok_asum[r]);
  }
  // Every CTA's partial tile (and its own factors) in place. Unsplit (a
  // cluster of one) the consumers only read their own CTA's: a barrier among
  // them is enough.
  if (splits > 1)
    ptx::cluster_sync();
  else
    ptx::named_barrier(1, kThr);

  // 2. Slice `rank` of the tile's 16-B pieces, summed over the cluster.
  // Thread ctid takes pieces begin + ctid, + 256, ... of the slice: a row
  // holds kPiecesPerRow pieces (a divisor of 256), so all of a thread's
  // pieces lie in one column of 4 channels, kRowStep token rows apart: the
  // channel factors are read once. The tiles of >= 2,048 pieces take them
  // kBatch at a time and issue a batch's loads from kZ ranks at once
  // (kLoads = kZ x kBatch 16-B loads in flight) before adding any: a
  // distributed shared-memory load waits ~200 cycles, and one piece at a
  // time (2 loads in flight at split 2) made 128 x 128 / 2 pay that wait 8
  // times per thread (2 times batched). ptxas compiles the consumers within
  // the launch's registers (168 a thread, 80 at two CTAs per SM): 16 loads in
  // flight spilled at 168, so kLoads is 8 or 4. The smaller tiles (< 2,048
  // pieces), the two-CTA tiles and slices of at most 3 pieces a thread take
  // one piece at a time (ptxas unrolls the ranks by 4): batched, 128 x 64 / 3
  // (2.7 pieces a thread, one round trip saved) ran 0.3-2.1% slower on the
  // H200, 128 x 64 / 2 (4 pieces) 1.5-4% and 128 x 128 / 2 (8) 3-7% faster
  // (bench/results/2026-12-03-gemm-h200-r26.md).
  // (kBN64: 128 threads, 16 pieces a row: the same walk, a thread's pieces
  // 8 rows apart.)
  const int rank = static_cast<int>(ptx::cluster_ctarank());
  constexpr int kPiecesPerRow = kCh / 4, kPieces = BM * kPiecesPerRow;
  static_assert(kThr % kPiecesPerRow == 0, "a thread's pieces share one column");
  constexpr int kRowStep = kThr / kPiecesPerRow;
  constexpr uint32_t kOffStep = kRowStep * kRow * 4;  // bytes between a thread's pieces
  constexpr int kBatch = kLoads < 8 || kPieces < 2048 ? 1 : kLoads / 2, kZ = kLoads / kBatch;
  const int begin = rank * kPieces / splits, end = (rank + 1) * kPieces / splits;
  const int first = begin + ctid;                        // this thread's first piece
  const int pieces = first < end ? (end - first + kThr - 1) / kThr : 0;
  const int row0 = first / kPiecesPerRow, c = (first % kPiecesPerRow) * 4;
  const uint32_t off0 = ptx::smem_addr(part) + static_cast<uint32_t>(row0 * kRow + c) * 4;
  const int o = n_blk * kCh + c;
  const bool o_ok = o < p.n, vec_ok = (p.n & 3) == 0 && (reinterpret_cast<uintptr_t>(p.y) & 7) == 0 && o + 4 <= p.n;
  // This thread's 4 channels' factors (the column's: every piece's).
  float4 ch_s = make_float4(0.f, 0.f, 0.f, 0.f), ch_z = ch_s;
  if (!p.acc_out && pieces > 0) {
    ch_s = *reinterpret_cast<const float4*>(ch_f + c);
    if constexpr (!kG128) ch_z = *reinterpret_cast<const float4*>(ch_f + kCh + c);
  }
  // Piece i's sums v: the epilogue and the stores (or the exact sums, p.acc_out).
  auto finish = [&](int i, int32_t(&v)[4]) {
    const int row = row0 + kRowStep * i, t = m_blk * BM + row;
    if (t >= p.m || !o_ok) return;
    const size_t idx = static_cast<size_t>(t) * p.n + o;
    if (p.acc_out) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (o + e < p.n) p.acc_out[idx + e] = kG128 ? unbias_acc(v[e], p.x_sum[t]) : v[e];
      return;
    }
    const float2 tf = *reinterpret_cast<const float2*>(tok_f + 2 * row);  // s_x, a_sum
    if constexpr (kG128)  // the W4 tiles' biased weights: a_sum holds the code sum's bits
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = unbias_acc(v[e], __float_as_int(tf.y));
    const float s[4] = {ch_s.x, ch_s.y, ch_s.z, ch_s.w}, z[4] = {ch_z.x, ch_z.y, ch_z.z, ch_z.w};
    __half h[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float f = kG128 ? quant::epilogue_g128(v[e], tf.x, s[e])
                            : quant::epilogue_per_channel(v[e], tf.x, s[e], z[e], tf.y);
      h[e] = __float2half_rn(f);
    }
    if (vec_ok) {
      uint2 packed;
      packed.x = static_cast<uint32_t>(__half_as_ushort(h[0])) | (static_cast<uint32_t>(__half_as_ushort(h[1])) << 16);
      packed.y = static_cast<uint32_t>(__half_as_ushort(h[2])) | (static_cast<uint32_t>(__half_as_ushort(h[3])) << 16);
      *reinterpret_cast<uint2*>(p.y + idx) = packed;
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (o + e < p.n) p.y[idx + e] = h[e];
    }
  };
  // Piece i of rank (rank + dz) mod splits, dz = 1 .. splits - 1: another CTA of the cluster.
  auto remote = [&](int i, int dz) {
    const int z = rank + dz < splits ? rank + dz : rank + dz - splits;
    return ptx::ld_shared_cluster_v4(ptx::map_shared_rank(off0 + i * kOffStep, static_cast<uint32_t>(z)));
  };
  // This CTA's own piece i: an ordinary shared load.
  auto local = [&](int i) { return *reinterpret_cast<const int4*>(part + (row0 + kRowStep * i) * kRow + c); };
  if (kBatch == 1 || pieces <= 3) {  // one piece at a time
    for (int i = 0; i < pieces; ++i) {
      const int4 w0 = local(i);
      int32_t v[4] = {w0.x, w0.y, w0.z, w0.w};
      for (int dz = 1; dz < splits; ++dz) {
        const int4 w = remote(i, dz);
        v[0] += w.x, v[1] += w.y, v[2] += w.z, v[3] += w.w;
      }
      finish(i, v);
    }
  } else if constexpr (kBatch > 1) {
    for (int i0 = 0; i0 < pieces; i0 += kBatch) {
      int32_t v[kBatch][4];
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (i0 + b < pieces) {
          const int4 w0 = local(i0 + b);
          v[b][0] = w0.x, v[b][1] = w0.y, v[b][2] = w0.z, v[b][3] = w0.w;
        }
      for (int dz0 = 1; dz0 < splits; dz0 += kZ) {
        int4 w[kZ][kBatch];
#pragma unroll
        for (int dz = 0; dz < kZ; ++dz)
#pragma unroll
          for (int b = 0; b < kBatch; ++b)
            if (dz0 + dz < splits && i0 + b < pieces) w[dz][b] = remote(i0 + b, dz0 + dz);
#pragma unroll
        for (int dz = 0; dz < kZ; ++dz)
#pragma unroll
          for (int b = 0; b < kBatch; ++b)
            if (dz0 + dz < splits && i0 + b < pieces)
              v[b][0] += w[dz][b].x, v[b][1] += w[dz][b].y, v[b][2] += w[dz][b].z, v[b][3] += w[dz][b].w;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        if (i0 + b < pieces) finish(i0 + b, v[b]);
    }
  }
  cluster_reduce_leave(splits);
}

}  // namespace qserve::cuda::w4a8::wgmma
