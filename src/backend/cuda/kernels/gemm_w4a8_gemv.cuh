// The W4A8 decode kernels for m <= 8, 16 and 32 tokens (docs/gemm-hopper.md,
// "Decode without shared-memory stages"): every SM streams weights with plain
// 16-byte loads into registers, no TMA, no pipeline barriers.
//
// CTAs of 8 warps walk the 16-channel tiles t16 (blockIdx.x, + gridDim.x,
// ...; at most kCtasPerSm CTAs per SM: a layer of more tiles than that runs
// persistent, its weight loads in flight across the tiles' ends). Warp w
// takes a tile's 64-wide k blocks w, w + 8, ... (g128: in pairs, 2 w and 2 w
// + 1, then + 16, ..., the two blocks of one group sharing one level-2 word
// and one set of its parameters): its lane reads each block's
// 16 bytes of the repacked compute order (quant/w4a8_repack.h:
// [n / 128][k / 64][8 tiles][32 lanes][16 B]), which
// unpack to the mma.sync m16n8k32 A fragments of the block's two k32 steps
// (rows = the tile's channels g, g + 8); one mma.sync per k32 step and
// 8-token group (kNT groups: 8 or 16 tokens). Every MMA is u8 x s8: g128's
// weights biased by 128 (unpack8), per-channel's high nibbles (rows g + 8)
// masked in place as 16 x the weight (unpack8_pc16, one instruction a
// register); the epilogue divides those rows' sums by 16 (exact).
//
// The activations' B fragments (8 tokens x 32 k each) come one of two ways:
// - kRing = false (m <= 4): four 4-byte loads per block straight from X. Each
//   touches the lines of m rows, cheap while m is small; no shared memory,
//   so the CTAs also start beside a neighbor kernel that holds most of it.
// - kRing = true (5 <= m <= 16): a per-warp shared-memory ring. A lane copies
//   16 contiguous bytes of a token row (cp.async, cached in L1, where the
//   other CTAs of the SM find the same rows) and one ldmatrix.x4 gives a
//   block's four B registers: 8 L1 wavefronts per block and group where the
//   direct loads take 32 at m = 8 (what made round 12's kernel lose there).
//   The ring holds two chunks, so the next chunk's activations load during
//   this one's MMAs without registers; rows at or past m are zeroed once and
//   never copied; the B fragments of kChunk / kNT blocks are read ahead of
//   their MMAs so that the ldmatrix latencies overlap.
//
// The warps' INT32 partials meet in shared memory; thread (group, register,
// lane) sums the 8 warps' values of one output and applies the epilogue of
// quant/gemm_epilogue.h, as the other W4A8 kernels do (the accumulators are
// exact: the same sums in another order). Its factors wait in registers,
// loaded long before: at the end of a CTA a load would add one more memory
// round trip (0.2-0.8 us per launch on the k = 4096 layers, round 2 of
// bench/results/2026-12-01-gemm-h200-r16.md).
//
// The weights of a warp's chunks (kChunk blocks) sit in kAhead + 1 register
// slots: the chunk being multiplied and the next kAhead ones in flight, also
// across a tile's end (the next tile's first chunks load during the last
// ones). The chunk loop is unrolled so that every step's slot (and ring half)
// is a compile-time index and no register is ever copied: a copy of a load's
// destination waits for the load where the copy is issued (a version with
// such copies, round 1 of bench/results/2026-11-30-gemm-h200-r14.md, ran
// 10-17% slower).
//
// Programmatic dependent launch: the weights (and g128 level-2 words) of a
// warp's first kAhead chunks are loaded before the dependency wait, the
// activations after it.
//
// gemv8 runs three CTAs per SM (396 tiles, 6336 channels, in one wave on 132
// SMs; 80 registers) with one chunk ahead; gemv16 two (its ring is 64 KB a
// CTA: three would leave L1 too little room for the activation rows,
// 1.2-1.8x slower); gemv8d (kAhead = 2) two with two chunks ahead, the
// registers of the third CTA spent on loads in flight: faster on layers of
// at most two tiles per SM (the 4096-row o and down layers), where three
// CTAs per SM gain nothing.
// gemv16d is gemv16 with two chunks ahead (116 / 119 registers): faster where
// the CTAs walk several tiles (round 2 of
// bench/results/2026-12-01-gemm-h200-r16.md), not yet planned.
//
// kResident (gemv8r / 16r / 32r, gemm_w4a8_gemv.h): one CTA of 16 warps per
// SM, the 16 warps on one tile at a time. A warp's k blocks are the same in
// every tile, so its activation rows ([blocks][kNT groups][8 rows][64 B],
// swizzled as the ring) are copied into shared memory once, after the
// dependency wait, and every tile's B fragments come from there by ldmatrix:
// no copies, waits or warp barriers in the loop. The warps' sums go through
// two buffers in turn, so a tile takes one block barrier (the epilogue of
// tile t reads one buffer while the warps fill the other with tile t + 1;
// tile t + 2 refills it only after the barrier of t + 1, which the epilogue
// threads reach after their reads).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda_fp16.h>

#include "backend/cuda/gemm_w4a8_gemv.h"  // warp0_blocks (the resident layout)
#include "backend/cuda/gemm_w4a8_launch.h"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "backend/cuda/kernels/mma_primitives.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "quant/gemm_epilogue.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8::gemv {

inline constexpr int kWarps = 8, kThreads = 32 * kWarps;  // the ring and direct kernels
inline constexpr int kChunk = 4;  // k64 blocks per warp and step (4 x 16 B per lane a chunk)

// The activation ring of a warp: [2 chunks][kChunk blocks][kNT groups][8
// rows][64 B], the 16-byte pieces of row r at piece ^ ((r / 2) % 4) (the 8
// rows of an ldmatrix phase fall in distinct banks, unpadded).
inline constexpr int kGroupBytes = 8 * 64;
template <int kNT>
inline constexpr int kRingBytes = 2 * kChunk * kNT * kGroupBytes;
template <int kNT>
inline constexpr int kSmemBytes = kWarps * kRingBytes<kNT>;  // dynamic shared memory of a CTA (kRing)

__device__ __forceinline__ int piece_offset(int row, int piece) { return row * 64 + 16 * (piece ^ ((row >> 1) & 3)); }

// Where a warp's B fragments come from: 4-byte loads straight from X (m <=
// 4), the per-warp ring of two chunks, or the resident rows.
enum class XSource { kDirect, kRing, kResident };

template <bool kG128, int kNT, XSource kX, int kW, int kCtasPerSm, int kAhead>
__global__ void __launch_bounds__(32 * kW, kCtasPerSm) gemm_w4a8_gemv_kernel(const KernelParams p) {
  constexpr bool kRing = kX == XSource::kRing, kResident = kX == XSource::kResident;
  static_assert(kX != XSource::kDirect || kNT == 1, "the direct activation loads serve one 8-token group");
  static_assert(kResident || kW == kWarps, "the ring and direct kernels run 8 warps");
  static_assert(kAhead == 1 || kAhead == 2);
  static_assert(128 * kNT <= 32 * kW, "one epilogue thread per output of a tile");
  // kRing: the warps' rings; kResident: the warps' activation rows, then the two sum buffers
  extern __shared__ __align__(128) unsigned char gemv_smem[];
  // [warp][group * 4 + accumulator register][lane] (kResident: in gemv_smem)
  __shared__ int32_t red_static[kResident ? 1 : kW][4 * kNT][32];
  const int tiles = (p.n + 15) / 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int k64_total = p.k >> 6;
  // This warp's k64 blocks of a tile (block i of the warp is k64 block
  // block_kb(i)): per-channel warp + 8 i; g128 the pairs (2 warp, 2 warp + 1)
  // + 16 j, both blocks of one group, so that one level-2 word and one set of
  // its parameters serve two blocks (g128 4-9% faster on the qkv and down
  // layers; the per-channel kernels ran 0-8% slower in that order:
  // bench/results/2026-11-30-gemm-h200-r14.md, round 8).
  const int blocks = kG128 ? 2 * (k64_total / (2 * kW)) + min(max(k64_total % (2 * kW) - 2 * warp, 0), 2)
                           : (k64_total - warp + kW - 1) / kW;
  auto block_kb = [warp](int i) { return kG128 ? 2 * kW * (i >> 1) + 2 * warp + (i & 1) : warp + kW * i; };
  unsigned char* ring = gemv_smem + warp * kRingBytes<kNT>;
  // kResident: this warp's rows (warp 0 has the most blocks: every warp's
  // area is sized by its count), then the sum buffers [2][kW][4 kNT][32]
  // (the layout resident_smem_bytes sizes)
  const int x_warp_bytes = warp0_blocks(kG128, kW, p.k) * kNT * kGroupBytes;
  unsigned char* xres = gemv_smem + warp * x_warp_bytes;
  int32_t* red_dyn = reinterpret_cast<int32_t*>(gemv_smem + kW * x_warp_bytes);
  int red_half = 0;  // kResident: the sum buffer of the current tile

  if (blockIdx.x >= tiles) return;  // (the planner launches at most one CTA per tile)
  // This warp's sequence of chunks: chunks 0, kChunk, .. of tile blockIdx.x,
  // then of tile blockIdx.x + gridDim.x, ...; a warp without blocks (small k)
  // still takes one (empty) chunk per tile, for the tile's reduction.
  const int chunks = blocks > 0 ? (blocks + kChunk - 1) / kChunk : 1;

  // Register slots of kSlots chunks' weights: the chunk being multiplied and
  // the next kAhead ones in flight. Slot indices are compile-time (the chunk
  // loop below is unrolled by kSlots), so no register is ever copied: a copy
  // of a load's destination would wait for the load where it is issued.
  constexpr int kSlots = kAhead + 1;
  uint4 w[kSlots][kChunk];
  uint32_t l[kSlots][kChunk];  // g128: their level-2 words (group kb / 2)
  // Chunk c (blocks c.. of this warp) of tile t16: block kb of the tile for
  // this lane is uint4 ((t16 / 8) * k64_total + kb) * 256 + (t16 % 8) * 32 + lane.
  // The weights, read once, do not allocate in L1 (ld_stream_v4), which stays
  // for the activation rows the SM's warps read again (the ring's cp.async.ca
  // copies, the direct loads): 1.7% off the decode kernels' times (median
  // over 126 timings, up to 10% on gate_up; bench/results/2026-12-02-gemm-h200-r19.md).
  auto load_chunk = [&](int t16, int c, uint4 (&wn)[kChunk], uint32_t (&ln)[kChunk]) {
    const uint4* wt = p.w + static_cast<size_t>(t16 >> 3) * k64_total * 256 + (t16 & 7) * 32 + lane;
    const uint32_t* l2t = p.level2 + (kG128 ? quant::level2_word_offset(t16, 0, p.groups) + g : 0);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int bi = c + i;
      if (bi < blocks) {
        const int kb = block_kb(bi);
        wn[i] = ptx::ld_stream_v4(wt + static_cast<size_t>(kb) * 256);
        if constexpr (kG128)
          if (i % 2 == 0) ln[i] = __ldg(l2t + (kb >> 1) * 64);  // (chunks start at even blocks: i, i + 1 a pair)
      }
    }
  };
  // Load chunk (t16, cc) + d of the sequence, nothing past the last tile.
  auto load_ahead = [&](int t16, int cc, int d, uint4 (&wn)[kChunk], uint32_t (&ln)[kChunk]) {
    cc += d;
    while (cc >= chunks) cc -= chunks, t16 += gridDim.x;  // (at most kAhead times)
    if (t16 < tiles) load_chunk(t16, cc * kChunk, wn, ln);
  };
  // No kernel writes the weights: the first kAhead chunks load before the dependency wait.
#pragma unroll
  for (int d = 0; d < kAhead; ++d) load_ahead(blockIdx.x, 0, d, w[d], l[d]);

  // kRing: rows at or past m stay zero: this lane's piece (row g, piece q) of
  // every ring slot whose token 8 j + g is past m.
  if constexpr (kRing) {
#pragma unroll
    for (int j = 0; j < kNT; ++j)
      if (8 * j + g >= p.m)
        for (int s = 0; s < 2 * kChunk; ++s)
          *reinterpret_cast<uint4*>(ring + (s * kNT + j) * kGroupBytes + piece_offset(g, q)) = make_uint4(0, 0, 0, 0);
  }

  // The epilogue's factors in registers, loaded long before the epilogue (a
  // load there, after the tile's last MMAs and the reduction, put one more
  // memory round trip at the end of every CTA). Epilogue thread (j, r, ln)
  // (threadIdx.x < 128 kNT, below) writes channel t16 * 16 + ep_co, token
  // ep_tok. The channel factors are part of the weights (no kernel writes
  // them): the first tile's load before the dependency wait, the next tile's
  // right after a tile's epilogue. The token factors follow the wait.
  const bool ep_thread = threadIdx.x < 128 * kNT;
  const int ep_jr = threadIdx.x >> 5, ep_ln = threadIdx.x & 31;
  const int ep_co = (ep_ln >> 2) + 8 * ((ep_jr & 3) >> 1), ep_tok = 8 * (ep_jr >> 2) + 2 * (ep_ln & 3) + (ep_jr & 1);
  const bool ep_factors = ep_thread && !p.acc_out;
  float ep_scale = 0.0f, ep_szero = 0.0f, ep_sx = 0.0f, ep_asum = 0.0f;
  int32_t ep_xsum = 0;  // g128: the token's code sum (the biased weights' accumulators, unbias_acc)
  auto load_channel_factors = [&](int t16) {
    const int o = t16 * 16 + ep_co;  // (< n16 * 16: the factors' length)
    if (ep_factors && t16 < tiles) {
      ep_scale = __ldg(p.ch_scale + o);
      if constexpr (!kG128) ep_szero = __ldg(p.ch_szero + o);
    }
  };
  load_channel_factors(blockIdx.x);

  ptx::pdl_trigger();
  ptx::pdl_wait();  // X, s_x, a_sum come from the previous kernel; y may be read by it
  if (ep_factors && ep_tok < p.m) {
    ep_sx = __half2float(p.s_x[ep_tok]);
    if constexpr (!kG128) ep_asum = __half2float(p.a_sum[ep_tok]);
  }
  if constexpr (kG128)
    if (ep_thread && ep_tok < p.m) ep_xsum = p.x_sum[ep_tok];

  // kResident: this warp's rows, once: lane (g, q) copies piece q of row 8 j
  // + g of each of its blocks (zeros at rows past m). The warp waits for them
  // at its first step, after that step has issued the next chunk's weights
  // (waiting here put the third tile's loads ~1 us late).
  bool x_ready = !kResident;
  if constexpr (kResident) {
    for (int i = 0; i < blocks; ++i) {
      const int kb = block_kb(i);
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        const int row = 8 * j + g;
        unsigned char* dst = xres + (i * kNT + j) * kGroupBytes + piece_offset(g, q);
        if (row < p.m)
          ptx::cp_async16(dst, p.x + static_cast<size_t>(row) * p.k + kb * 64 + 16 * q, true);
        else
          *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      }
    }
    ptx::cp_async_commit();
  }

  // kRing: chunk c's activations into ring half h: this lane copies the 16
  // bytes X[8 j + g][kb * 64 + 16 q ..] of its row and piece, for each of its
  // rows below m; one commit group per call.
  auto copy_x = [&](int c, int h) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int bi = c + i;
      if (bi < blocks) {
        const int kb = block_kb(bi);
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
          const int row = 8 * j + g;
          if (row < p.m)
            ptx::cp_async16_ca(ring + ((h * kChunk + i) * kNT + j) * kGroupBytes + piece_offset(g, q),
                          p.x + static_cast<size_t>(row) * p.k + kb * 64 + 16 * q);
        }
      }
    }
    ptx::cp_async_commit();
  };
  // ldmatrix.x4 row addresses: lanes 8 i .. 8 i + 7 give rows 0..7 of piece i
  // (k 16 i .. 16 i + 15): register i of lane (g, q) = X[row g][16 i + 4 q ..],
  // the B fragments {b0, b1} of k32 step 0, then of step 1.
  const int ld_offset = piece_offset(lane & 7, lane >> 3);
  // Direct: this lane's token row of X (row g of the group), null past m.
  const int8_t* xr = kX == XSource::kDirect && g < p.m ? p.x + static_cast<size_t>(g) * p.k + q * 4 : nullptr;

  // The MMAs of block i of a chunk (its weights ws[i], B fragments b: {b0,
  // b1} of k32 step 0, then step 1); g128: lp holds its group's level-2
  // parameters, taken from ls[i] at the first block of a pair (i even).
  auto mma_block = [&](const uint4 (&ws)[kChunk], const uint32_t (&ls)[kChunk], int i, const uint32_t (&b)[kNT][4],
                       wgmma::Level2& lp, int32_t (&acc)[kNT][4]) {
    if constexpr (kG128)
      if (i % 2 == 0) lp = wgmma::level2_params(ls[i]);
    const uint4& wi = ws[i];
    uint32_t a[8];
    wgmma::unpack8_u8<kG128>(wi.x, lp, a[0], a[1]);
    wgmma::unpack8_u8<kG128>(wi.y, lp, a[2], a[3]);
    wgmma::unpack8_u8<kG128>(wi.z, lp, a[4], a[5]);
    wgmma::unpack8_u8<kG128>(wi.w, lp, a[6], a[7]);
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      // u8 x s8 both ways (unpack8_u8; per-channel's rows g + 8 divided by 16 in the epilogue)
      ptx::mma_s8_16832<true>(acc[j], a[0], a[1], a[2], a[3], b[j][0], b[j][1]);
      ptx::mma_s8_16832<true>(acc[j], a[4], a[5], a[6], a[7], b[j][2], b[j][3]);
    }
  };

  // The MMAs of chunk c (blocks c.. of this warp) with B fragments from shared
  // memory: block i of the chunk has its kNT groups of rows at rows(i). The B
  // fragments of kHoist blocks at a time are read ahead of their MMAs, so that
  // the ldmatrix latencies overlap (16 registers of them). kRing reads them
  // unconditionally (a ring slot past the warp's last block holds stale rows,
  // which no MMA reads); the resident rows only for the warp's own blocks.
  // lp spans the hoisted groups: at kNT = 4 a g128 pair of blocks falls in two.
  auto mma_chunk_smem = [&](const uint4 (&ws)[kChunk], const uint32_t (&ls)[kChunk], int c, auto rows,
                            int32_t (&acc)[kNT][4]) {
    constexpr int kHoist = kChunk / kNT > 0 ? kChunk / kNT : 1;
    wgmma::Level2 lp{};
#pragma unroll
    for (int i0 = 0; i0 < kChunk; i0 += kHoist) {
      if (c + i0 >= blocks) break;
      uint32_t b[kHoist][kNT][4];
#pragma unroll
      for (int i = 0; i < kHoist; ++i)
        if (kRing || c + i0 + i < blocks)
#pragma unroll
          for (int j = 0; j < kNT; ++j) ptx::ldmatrix_x4(b[i][j], rows(i0 + i) + j * kGroupBytes + ld_offset);
#pragma unroll
      for (int i = 0; i < kHoist; ++i) {
        if (c + i0 + i >= blocks) break;
        mma_block(ws, ls, i0 + i, b[i], lp, acc);
      }
    }
  };

  // The chunk cur_cc of tile cur_t16 from register slot kS and, kRing, ring
  // half h: the positions of the sequence take the slots and the halves in
  // turn.
  int32_t acc[kNT][4] = {};
  int cur_t16 = blockIdx.x, cur_cc = 0;
  auto step = [&](auto slot, auto half) {
    constexpr int kS = decltype(slot)::value;
    load_ahead(cur_t16, cur_cc, kAhead, w[(kS + kAhead) % kSlots], l[(kS + kAhead) % kSlots]);  // kAhead chunks on
    if constexpr (kResident) {
      if (!x_ready) {  // the first step: the resident rows (this lane's copies, then the warp's)
        ptx::cp_async_wait<0>();
        __syncwarp();
        x_ready = true;
      }
    }
    const int c = cur_cc * kChunk;
    if constexpr (kRing) {
      constexpr int h = decltype(half)::value;
      if (cur_cc + 1 < chunks || cur_t16 + static_cast<int>(gridDim.x) < tiles)
        copy_x(cur_cc + 1 < chunks ? c + kChunk : 0, h ^ 1);  // the next chunk's activations
      else
        ptx::cp_async_commit();  // an empty group: the wait below counts one per chunk
      ptx::cp_async_wait<1>();   // this chunk's activations (this lane's copies) ...
      __syncwarp();              // ... and the other lanes'
      mma_chunk_smem(w[kS], l[kS], c, [&](int i) { return ring + (h * kChunk + i) * kNT * kGroupBytes; }, acc);
      __syncwarp();  // ring half h is refilled by the next chunk's copies
    } else if constexpr (kResident) {
      mma_chunk_smem(w[kS], l[kS], c, [&](int i) { return xres + (c + i) * kNT * kGroupBytes; }, acc);
    } else {
      // b[i][0] = X[token][kb * 64 + 4 q + (0..3, 16..19, 32..35, 48..51)] of block i.
      uint32_t b[kChunk][1][4];
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const bool ok = xr != nullptr && c + i < blocks;
          b[i][0][r] = ok ? __ldg(reinterpret_cast<const uint32_t*>(xr + block_kb(c + i) * 64 + 16 * r)) : 0u;
        }
      wgmma::Level2 lp{};
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        if (c + i >= blocks) break;
        mma_block(w[kS], l[kS], i, b[i], lp, acc);
      }
    }
    if (++cur_cc < chunks) return;
    // The tile's last chunk: the warps' partials meet in shared memory.
    const int t16 = cur_t16;
    cur_cc = 0, cur_t16 += gridDim.x;
    // red(w, jr, ln): warp w's accumulator jr % 4 of group jr / 4 in lane ln
    int32_t* red_tile = kResident ? red_dyn + red_half * (kW * 4 * kNT * 32) : &red_static[0][0][0];
    auto red = [red_tile](int w, int jr, int ln) -> int32_t& { return red_tile[(w * 4 * kNT + jr) * 32 + ln]; };
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) red(warp, 4 * j + r, lane) = acc[j][r], acc[j][r] = 0;
    __syncthreads();
    // Thread (j, r, ln) < 128 kNT: accumulator r of lane ln in group j =
    // channel t16 * 16 + ln / 4 + 8 (r / 2) (ep_co), token 8 j + 2 (ln % 4) +
    // r % 2 (ep_tok).
    if (ep_thread) {
      int32_t v = 0;
#pragma unroll
      for (int wp = 0; wp < kW; ++wp) v += red(wp, ep_jr, ep_ln);
      if constexpr (kG128)
        v = wgmma::unbias_acc(v, ep_xsum);
      else if (ep_jr & 2)
        v >>= 4;  // rows g + 8 (accumulators 2, 3) hold 16 x their sum: exact
      const int o = t16 * 16 + ep_co;
      if (o < p.n && ep_tok < p.m) {
        const size_t idx = static_cast<size_t>(ep_tok) * p.n + o;
        if (p.acc_out) {
          p.acc_out[idx] = v;
        } else {
          const float f = kG128 ? quant::epilogue_g128(v, ep_sx, ep_scale)
                                : quant::epilogue_per_channel(v, ep_sx, ep_scale, ep_szero, ep_asum);
          p.y[idx] = __float2half_rn(f);
        }
      }
      load_channel_factors(cur_t16);  // the next tile's (cur_t16 moved on above)
    }
    if constexpr (kResident)
      red_half ^= 1;  // the next tile's sums go to the other buffer (the comment at the top)
    else
      __syncthreads();  // red is written again for the next tile
  };

  if constexpr (kRing) copy_x(0, 0);
  // Positions base + s from slot s: the weights (and activations) stay in
  // flight across a tile's end (the next tile's first chunks load during the
  // last ones).
  // Unrolled so that the slot (position % kSlots) and the ring half
  // (position % 2) of every step are compile-time constants.
  constexpr int kUnroll = kRing && kSlots % 2 != 0 ? 2 * kSlots : kSlots;
  while (cur_t16 < tiles)
    [&]<int... kI>(std::integer_sequence<int, kI...>) {
      ((cur_t16 < tiles ? step(std::integral_constant<int, kI % kSlots>{}, std::integral_constant<int, kI % 2>{}) : void()),
       ...);
    }(std::make_integer_sequence<int, kUnroll>{});
  if constexpr (kRing) ptx::cp_async_wait<0>();  // (only empty groups can be left)
}

}  // namespace qserve::cuda::w4a8::gemv
