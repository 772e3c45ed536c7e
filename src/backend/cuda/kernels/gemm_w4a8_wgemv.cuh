// The wgmma decode kernels (tiles wgemv16 / wgemv32 / wgemv64; m <= 16 / 32
// / 64): the decode kernels' weight stream (plain 16-byte loads straight into
// registers, every SM streaming, the first chunks before the dependency
// wait) with the tensor work of wgmma instead of mma.sync, and the split of k
// summed through distributed shared memory. docs/gemm-hopper.md, "wgmma
// decode kernels".
//
// A CTA is one warpgroup (128 threads, up to three CTAs per SM) on one
// 64-channel tile (blockIdx.x / splits) and one range of 128-wide k blocks
// (rank blockIdx.x % splits of the tile's cluster of `splits` CTAs). Warp w
// of the warpgroup holds the 16-channel tile t16 = 4 tile + w: wgmma's
// register-A fragment per warp is the mma.sync m16n8k32 A fragment, so the
// repacked compute order (quant/w4a8_repack.h: [n / 128][k / 64][8 tiles][32
// lanes][16 B]) gives each lane its A registers of a k64 block with one
// 16-byte load and wgmma::unpack8 (g128: + the level-2 dequantization), as
// for the other W4A8 kernels.
//
// The activations of the CTA's k range, X[0..kN)[k range], are copied once
// into shared memory ([k128 blocks][kN rows][128 B], 128-B swizzle: 16-B
// piece c of row r at c ^ (r % 8), the layout a K-major wgmma B descriptor
// reads), rows at or past m zero-filled. Per k64 block: 2 wgmma m64nkNk32
// (A = the block's dequantized registers, B = the block's half of a k128
// row), one commit group; the next block's unpacking overlaps it (two A
// register sets, wgmma.wait_group 1).
//
// The weights of kChunk blocks per lane form a chunk; kSlots chunks sit in
// register slots (the one multiplied and kSlots - 1 in flight), slot indices
// compile-time (the chunk loop is unrolled by kSlots: a copy of a load's
// destination would wait for the load, gemm_w4a8_gemv.cuh). The first
// kSlots - 1 chunks and the channel factors load before the dependency wait;
// the activations and the token factors after it.
//
// The split of k: each CTA stores its partial tile [kN tokens][64 channels +
// 4] INT32 over its activations (no longer read) and its copy of the
// factors; after a cluster barrier CTA r sums 16-B pieces r / splits of the
// tile over the cluster (distributed shared memory, rank order: exact
// integers either way), applies the epilogue (quant/gemm_epilogue.h) and
// stores 4 fp16 outputs per piece; a second cluster barrier keeps the
// partial tiles alive until all are read.
#pragma once

#include <cstdint>
#include <utility>

#include <cuda_fp16.h>

#include "backend/cuda/gemm_w4a8_launch.h"
#include "backend/cuda/gemm_w4a8_wgemv.h"
#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "backend/cuda/kernels/gemm_wgmma_s8.cuh"
#include "backend/cuda/kernels/mma_primitives.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "quant/gemm_epilogue.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8::wgemv {

inline constexpr int kChunk = 4;  // k64 blocks per chunk of weights (4 x 16 B per lane)
// Chunks in register slots (the one multiplied, the others in flight): 4
// (16 blocks, 64 registers), 3 beside the larger accumulators of 64 tokens.
constexpr int slots_for(int tokens) { return tokens >= 64 ? 3 : 4; }
// Independent accumulator sets, the k32 steps taking them in turn, so that
// a wgmma need not wait for the one before it (the guess after call 1 of
// bench/results/2026-12-02-gemm-h200-r19.md; call 2 measured it at -3% to
// +8% on the o layers: that chain was not the limit). 4 sets at 16 tokens
// (32 registers), 2 above.
constexpr int acc_sets_for(int tokens) { return tokens <= 16 ? 4 : 2; }

template <bool kG128, int kN>
__global__ void __launch_bounds__(kThreads, kMaxCtasPerSm) gemm_w4a8_wgemv_kernel(const KernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kSlots = slots_for(kN), kAcc = acc_sets_for(kN);
  extern __shared__ uint8_t wgemv_smem_raw[];
  // 1024-B aligned (the swizzle atom), by an offset from the declared array
  // so that the compiler still knows the pointer is shared.
  uint8_t* const xs = wgemv_smem_raw + ((1024u - (ptx::smem_addr(wgemv_smem_raw) & 1023u)) & 1023u);
  const int splits = p.splits;
  const int tile = blockIdx.x / splits, rank = blockIdx.x - tile * splits;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const int t16 = 4 * tile + warp;
  const int k64_total = p.k >> 6, kt = k128_total(p.k);
  const int b0 = rank * kt / splits, nxb = (rank + 1) * kt / splits - b0;  // this CTA's k128 blocks
  const int kb0 = 2 * b0, nb = min(2 * (b0 + nxb), k64_total) - kb0;    // ... and its k64 blocks
  const int chunks = (nb + kChunk - 1) / kChunk;
  // The factors follow the activations / partial tile (smem_bytes' layout):
  // [64 channel scales][64 scaled zeros][kN s_x][kN a_sum].
  const size_t x_region = max(size_t{128} * kN * max_k128_blocks(p.k, splits), size_t{4} * kPartRowInts * kN);
  float* const fac = reinterpret_cast<float*>(xs + x_region);

  // Block kb of this lane's tile: uint4 ((t16 / 8) * k64_total + kb) * 256 + (t16 % 8) * 32 + lane;
  // g128 its level-2 word (group kb / 2, rows g and g + 8).
  const uint4* const wt = p.w + static_cast<size_t>(t16 >> 3) * k64_total * 256 + (t16 & 7) * 32 + lane;
  const uint32_t* const l2t = p.level2 + (kG128 ? quant::level2_word_offset(t16, 0, p.groups) + g : 0);
  uint4 w[kSlots][kChunk];
  uint32_t l2w[kSlots][kChunk / 2];
  auto load_chunk = [&](int c, uint4(&wn)[kChunk], uint32_t(&ln)[kChunk / 2]) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int bi = c * kChunk + i;
      if (bi < nb) {
        const int kb = kb0 + bi;
        wn[i] = __ldg(wt + static_cast<size_t>(kb) * 256);
        if constexpr (kG128)
          if (i % 2 == 0) ln[i / 2] = __ldg(l2t + (kb >> 1) * 64);  // (kb even: kb, kb + 1 one group)
      }
    }
  };
  // No kernel writes the weights or the channel factors: they load before the wait.
#pragma unroll
  for (int d = 0; d < kSlots - 1; ++d)
    if (d < chunks) load_chunk(d, w[d], l2w[d]);
  const bool factors = p.acc_out == nullptr;
  float f_scale = 0.0f, f_szero = 0.0f, f_sx = 0.0f, f_asum = 0.0f;
  if (factors && tid < kTileChannels) {
    const int o = tile * kTileChannels + tid;
    if (o < p.n16 * 16) {  // (the factors' length)
      f_scale = __ldg(p.ch_scale + o);
      if constexpr (!kG128) f_szero = __ldg(p.ch_szero + o);
    }
  }

  ptx::pdl_trigger();
  ptx::pdl_wait();  // X, s_x, a_sum come from the previous kernel; y may be read by it
  if (factors && tid < kN && tid < p.m) {
    f_sx = __half2float(p.s_x[tid]);
    if constexpr (!kG128) f_asum = __half2float(p.a_sum[tid]);
  }
  // The activations: 16-B piece c of row r of k128 block b; zeros at rows
  // past m and past k (a half last block).
  for (int i = tid; i < nxb * kN * 8; i += kThreads) {
    const int c = i & 7, r = (i >> 3) % kN, b = (i >> 3) / kN;
    const int kpos = (b0 + b) * 128 + c * 16;
    const bool ok = r < p.m && kpos < p.k;
    ptx::cp_async16(xs + (b * kN + r) * 128 + ((c ^ (r & 7)) << 4),
                    ok ? p.x + static_cast<size_t>(r) * p.k + kpos : p.x, ok);
  }
  ptx::cp_async_commit();

  int32_t acc[kAcc][kN / 2];
#pragma unroll
  for (int j = 0; j < kAcc; ++j)
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[j][i] = 0;
  // Chunk c from slot ws / ls, straight-line code (a branch or a loop edge
  // inside the wgmma pipeline makes ptxas serialize it): block i unpacks
  // into its own A registers a[i] (zeros for a block past the CTA's last,
  // whose weights were not loaded), then its 2 wgmmas (k 0-31, 32-63 of the
  // block: its half of k128 row bi / 2) on accumulator sets (2 i, 2 i + 1) %
  // kAcc; one commit group, done at the chunk's end.
  auto compute_chunk = [&](const uint4(&ws)[kChunk], const uint32_t(&ls)[kChunk / 2], int c) {
    uint32_t a[kChunk][8];
    wgmma::Level2 lp{};
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      if constexpr (kG128)
        if (i % 2 == 0) lp = wgmma::level2_params(ls[i / 2]);
      const int bi = c * kChunk + i;
      const bool real = bi < nb;
      wgmma::unpack8<kG128>(ws[i].x, lp, a[i][0], a[i][1]);
      wgmma::unpack8<kG128>(ws[i].y, lp, a[i][2], a[i][3]);
      wgmma::unpack8<kG128>(ws[i].z, lp, a[i][4], a[i][5]);
      wgmma::unpack8<kG128>(ws[i].w, lp, a[i][6], a[i][7]);
#pragma unroll
      for (int r = 0; r < 8; ++r) a[i][r] = real ? a[i][r] : 0u;
    }
    ptx::wgmma_fence();
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int bi = c * kChunk + i;
      const int bs = bi < nb ? bi : nb - 1;  // (a block of the CTA's rows: any, A is zero)
      const uint64_t desc = ptx::smem_desc_sw128(xs + (bs >> 1) * kN * 128) + 4 * (bs & 1);
      ptx::wgmma_s8_rs<kN>(acc[(2 * i) % kAcc], a[i][0], a[i][1], a[i][2], a[i][3], desc, 1);
      ptx::wgmma_s8_rs<kN>(acc[(2 * i + 1) % kAcc], a[i][4], a[i][5], a[i][6], a[i][7], desc + 2, 1);
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
  };
  bool x_ready = false;
  auto wait_x = [&] {  // the activations (this thread's copies, then everyone's), visible to wgmma
    ptx::cp_async_wait<0>();
    ptx::fence_proxy_async_shared();
    __syncthreads();
    x_ready = true;
  };
  int c = 0;
  auto step = [&](auto slot) {
    constexpr int kS = decltype(slot)::value;
    if (c + kSlots - 1 < chunks) load_chunk(c + kSlots - 1, w[(kS + kSlots - 1) % kSlots], l2w[(kS + kSlots - 1) % kSlots]);
    if (!x_ready) wait_x();  // (after the step's loads are issued)
    compute_chunk(w[kS], l2w[kS], c);
    ++c;
  };
  while (c < chunks)
    [&]<int... kI>(std::integer_sequence<int, kI...>) {
      ((c < chunks ? step(std::integral_constant<int, kI>{}) : void()), ...);
    }(std::make_integer_sequence<int, kSlots>{});
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < kAcc; ++j) ptx::reg_fence(acc[j]);
#pragma unroll
  for (int j = 1; j < kAcc; ++j)
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[0][i] += acc[j][i];
  if (!x_ready) wait_x();  // (a CTA without k blocks: its copies must land before the reuse below)

  // The partial tile over the activations (every warp's wgmmas are done with
  // them: the barrier), then the factors.
  __syncthreads();
  int32_t* const part = reinterpret_cast<int32_t*>(xs);
  // acc[0][4 i + 2 h + e]: channel 16 warp + g + 8 h of the tile, token 8 i + 2 q + e.
#pragma unroll
  for (int i = 0; i < kN / 8; ++i)
#pragma unroll
    for (int e4 = 0; e4 < 4; ++e4)
      part[(8 * i + 2 * q + (e4 & 1)) * kPartRowInts + 16 * warp + g + 8 * (e4 >> 1)] = acc[0][4 * i + e4];
  if (factors) {
    if (tid < kTileChannels) fac[tid] = f_scale, fac[kTileChannels + tid] = f_szero;
    if (tid < kN) fac[2 * kTileChannels + tid] = f_sx, fac[2 * kTileChannels + kN + tid] = f_asum;
  }
  if (splits > 1)
    ptx::cluster_sync();  // every CTA's partial tile in place
  else
    __syncthreads();

  // Pieces [begin, end) of the tile's 16-B pieces (token row, 4 channels), summed over the cluster.
  constexpr int kPieces = kN * (kTileChannels / 4);
  const int begin = rank * kPieces / splits, end = (rank + 1) * kPieces / splits;
  const uint32_t base = ptx::smem_addr(part);
  const bool vec_ok = (p.n & 3) == 0 && (reinterpret_cast<uintptr_t>(p.y) & 7) == 0;
  for (int pc = begin + tid; pc < end; pc += kThreads) {
    const int row = pc >> 4, ch = (pc & 15) * 4;
    const int o = tile * kTileChannels + ch;
    if (row >= p.m || o >= p.n) continue;
    const uint32_t off = base + static_cast<uint32_t>(row * kPartRowInts + ch) * 4;
    int32_t v[4] = {0, 0, 0, 0};
    for (int z = 0; z < splits; ++z) {
      const int4 s4 = splits > 1 ? ptx::ld_shared_cluster_v4(ptx::map_shared_rank(off, static_cast<uint32_t>(z)))
                                 : *reinterpret_cast<const int4*>(part + row * kPartRowInts + ch);
      v[0] += s4.x, v[1] += s4.y, v[2] += s4.z, v[3] += s4.w;
    }
    const size_t idx = static_cast<size_t>(row) * p.n + o;
    if (!factors) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (o + e < p.n) p.acc_out[idx + e] = v[e];
      continue;
    }
    const float sx = fac[2 * kTileChannels + row], asum = fac[2 * kTileChannels + kN + row];
    __half h[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float f = kG128 ? quant::epilogue_g128(v[e], sx, fac[ch + e])
                            : quant::epilogue_per_channel(v[e], sx, fac[ch + e], fac[kTileChannels + ch + e], asum);
      h[e] = __float2half_rn(f);
    }
    if (vec_ok && o + 4 <= p.n) {
      uint2 packed;
      packed.x = static_cast<uint32_t>(__half_as_ushort(h[0])) | (static_cast<uint32_t>(__half_as_ushort(h[1])) << 16);
      packed.y = static_cast<uint32_t>(__half_as_ushort(h[2])) | (static_cast<uint32_t>(__half_as_ushort(h[3])) << 16);
      *reinterpret_cast<uint2*>(p.y + idx) = packed;
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (o + e < p.n) p.y[idx + e] = h[e];
    }
  }
  if (splits > 1) ptx::cluster_sync();  // no CTA leaves while another may still read its partial tile
#endif
}

}  // namespace qserve::cuda::w4a8::wgemv
