// The W4A8 decode kernel for m <= 8 tokens (docs/gemm-hopper.md, "Decode
// without shared-memory stages"): every SM streams weights with plain 16-byte
// loads into registers, no TMA, no pipeline barriers.
//
// CTAs of 8 warps walk the 16-channel tiles t16 (blockIdx.x, + gridDim.x,
// ...; at most three CTAs per SM: a layer of more tiles than that runs
// persistent, its weight loads in flight across the tiles' ends). Warp w
// takes a tile's 64-wide k blocks w, w + 8, ...: its lane reads the block's
// 16 bytes of the repacked compute order (quant/w4a8_repack.h:
// [n / 128][k / 64][8 tiles][32 lanes][16 B]), which
// unpack to the mma.sync m16n8k32 A fragments of the block's two k32 steps
// (rows = the tile's channels g, g + 8); the activations' B fragments (8
// tokens x 32 k) are 4-byte loads from X [m, k]; one mma.sync per k32 step.
// The warps' INT32 partials meet in shared memory; thread (register, lane)
// sums the 8 warps' values of one output and applies the epilogue of quant/gemm_epilogue.h, as the other
// W4A8 kernels do (the accumulators are exact: the same sums in another order).
//
// Programmatic dependent launch: the weights (and g128 level-2 words) of a
// warp's first kChunk blocks are loaded before the dependency wait, the
// activations after it; later chunks' weights are loaded one chunk ahead.
// (Loading the activations a chunk ahead too measured 10% faster on the
// long-k down layer but took the registers of the third CTA per SM, which a
// layer of 384 tiles needs to run in one wave: 5.1 -> 7.3 us on Llama-3-8B
// qkv at m = 1.)
//
// Three CTAs per SM (__launch_bounds__): up to 396 tiles (6336 channels) in
// one wave on 132 SMs.
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "backend/cuda/gemm_w4a8_launch.h"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "backend/cuda/kernels/mma_primitives.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "quant/gemm_epilogue.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8::gemv {

inline constexpr int kWarps = 8, kThreads = 32 * kWarps;
inline constexpr int kChunk = 4;  // k64 blocks per warp and step (4 x 16 B per lane in flight, 8 with the next)

template <bool kG128>
__global__ void __launch_bounds__(kThreads, 3) gemm_w4a8_gemv_kernel(const KernelParams p) {
  __shared__ int32_t red[kWarps][4][32];  // [warp][accumulator register][lane]
  const int tiles = (p.n + 15) / 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  const int k64_total = p.k >> 6;
  const int blocks = (k64_total - warp + kWarps - 1) / kWarps;  // this warp's k64 blocks of a tile: warp + 8 i

  uint4 wa[kChunk] = {}, wb[kChunk] = {};     // this chunk's / the next chunk's weights
  uint32_t la[kChunk] = {}, lb[kChunk] = {};  // g128: their level-2 words (group kb / 2)
  // Chunk c (blocks c.. of this warp) of tile t16: block kb of the tile for
  // this lane is uint4 ((t16 / 8) * k64_total + kb) * 256 + (t16 % 8) * 32 + lane.
  auto load_chunk = [&](int t16, int c, uint4 (&w)[kChunk], uint32_t (&l)[kChunk]) {
    const uint4* wt = p.w + static_cast<size_t>(t16 >> 3) * k64_total * 256 + (t16 & 7) * 32 + lane;
    const uint32_t* l2t = p.level2 + (kG128 ? quant::level2_word_offset(t16, 0, p.groups) + g : 0);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int bi = c + i;
      if (bi < blocks) {
        const int kb = warp + kWarps * bi;
        w[i] = __ldg(wt + static_cast<size_t>(kb) * 256);
        if constexpr (kG128) l[i] = __ldg(l2t + (kb >> 1) * 64);
      }
    }
  };
  load_chunk(blockIdx.x, 0, wa, la);  // no kernel writes the weights: before the dependency wait
  ptx::pdl_trigger();
  ptx::pdl_wait();  // X, s_x, a_sum come from the previous kernel; y may be read by it

  // This lane's token row of X (row g of the n8 tile), null past m.
  const int8_t* xr = g < p.m ? p.x + static_cast<size_t>(g) * p.k + q * 4 : nullptr;

  // Tiles blockIdx.x, + gridDim.x, ...: the weights stay in flight across a
  // tile's end (the next tile's first chunk loads during the last chunk).
  for (int t16 = blockIdx.x; t16 < tiles; t16 += gridDim.x) {
    int32_t acc[4] = {0, 0, 0, 0};
    for (int c = 0; c < blocks; c += kChunk) {
      if (c + kChunk < blocks)
        load_chunk(t16, c + kChunk, wb, lb);
      else if (t16 + static_cast<int>(gridDim.x) < tiles)
        load_chunk(t16 + gridDim.x, 0, wb, lb);
      // B fragments of the chunk: b[i][s][0, 1] = X[token][kb * 64 + 32 s + 4 q + (0..3, 16..19)].
      uint32_t b[kChunk][2][2];
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const bool ok = xr != nullptr && c + i < blocks;
          const int8_t* src = ok ? xr + (warp + kWarps * (c + i)) * 64 + 32 * s : nullptr;
          b[i][s][0] = ok ? __ldg(reinterpret_cast<const uint32_t*>(src)) : 0u;
          b[i][s][1] = ok ? __ldg(reinterpret_cast<const uint32_t*>(src + 16)) : 0u;
        }
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        if (c + i >= blocks) break;
        const wgmma::Level2 l = kG128 ? wgmma::level2_params(la[i]) : wgmma::Level2{};
        uint32_t a[8];
        wgmma::unpack8<kG128>(wa[i].x, l, a[0], a[1]);
        wgmma::unpack8<kG128>(wa[i].y, l, a[2], a[3]);
        wgmma::unpack8<kG128>(wa[i].z, l, a[4], a[5]);
        wgmma::unpack8<kG128>(wa[i].w, l, a[6], a[7]);
        ptx::mma_s8_16832(acc, a[0], a[1], a[2], a[3], b[i][0][0], b[i][0][1]);
        ptx::mma_s8_16832(acc, a[4], a[5], a[6], a[7], b[i][1][0], b[i][1][1]);
      }
#pragma unroll
      for (int i = 0; i < kChunk; ++i) wa[i] = wb[i], la[i] = lb[i];
    }

#pragma unroll
    for (int r = 0; r < 4; ++r) red[warp][r][lane] = acc[r];
    __syncthreads();
    // Thread (r, ln) < 128: accumulator r of lane ln = channel t16 * 16 +
    // ln / 4 + 8 (r / 2), token 2 (ln % 4) + r % 2.
    if (threadIdx.x < 128) {
      const int r = threadIdx.x >> 5, ln = threadIdx.x & 31;
      int32_t v = 0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v += red[w][r][ln];
      const int o = t16 * 16 + (ln >> 2) + 8 * (r >> 1), tok = 2 * (ln & 3) + (r & 1);
      if (o < p.n && tok < p.m) {
        const size_t idx = static_cast<size_t>(tok) * p.n + o;
        if (p.acc_out) {
          p.acc_out[idx] = v;
        } else {
          const float sx = __half2float(p.s_x[tok]);
          const float f = kG128 ? quant::epilogue_g128(v, sx, p.ch_scale[o])
                                : quant::epilogue_per_channel(v, sx, p.ch_scale[o], p.ch_szero[o],
                                                              __half2float(p.a_sum[tok]));
          p.y[idx] = __float2half_rn(f);
        }
      }
    }
    __syncthreads();  // red is written again for the next tile
  }
}

}  // namespace qserve::cuda::w4a8::gemv
