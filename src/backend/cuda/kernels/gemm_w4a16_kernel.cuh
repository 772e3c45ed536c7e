// The W4A16 kernels (see ../gemm_w4a16.h for the design and
// quant/w4a16_repack.h for the weight layout and the reduction order).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "backend/cuda/gemm_w4a16_launch.h"
#include "backend/cuda/kernels/mma_primitives.cuh"  // ld_stream_v4: weights are read once, no L1 allocation

namespace qserve::cuda::w4a16 {

__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __half2 bits_h2(uint32_t u) { return *reinterpret_cast<__half2*>(&u); }

// Two weights: the nibbles at bits 0 and 16 of `shifted` -> half2
// ((1024 + q) - (1024 + z)) * s: exact subtraction, one rounding.
__device__ __forceinline__ uint32_t dequant_pair(uint32_t shifted, __half2 zero1024, __half2 scale) {
  uint32_t h;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(h) : "r"(shifted), "r"(0x000f000fu), "r"(0x64006400u));
  return h2_bits(__hmul2(__hsub2(bits_h2(h), zero1024), scale));
}

__device__ __forceinline__ void mma_f16_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Weight streaming, m <= 8 * NT tokens. Grid (ceil(n16 / MT), ceil(m / (8 NT))),
// WK warps per CTA, each over a contiguous 1 / WK of the k tiles, U k tiles of
// loads issued before their math. Dynamic shared memory: the partial tiles,
// [WK][MT * NT * 4][32] f32, summed in warp order (deterministic).
template <int MT, int NT, int WK, int U>
__global__ void __launch_bounds__(WK * 32) w4a16_stream_kernel(const StreamParams p) {
  extern __shared__ float red[];
  constexpr int V = MT * NT * 4;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int t16_0 = blockIdx.x * MT, tok0 = blockIdx.y * NT * 8;
  const int per_warp = (p.kt_total + WK - 1) / WK;
  const int kb = warp * per_warp, ke = min(p.kt_total, kb + per_warp);

  const uint4* wp[MT];
  const uint2* pp[MT];
  bool row_ok[MT];
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    row_ok[j] = t16_0 + j < p.n16;
    const size_t t16 = row_ok[j] ? t16_0 + j : 0;
    wp[j] = p.w + t16 * p.kt_total * 32 + lane;
    pp[j] = p.params + t16 * p.groups * 8 + g;
  }
  const uint4* xp[NT];
  bool tok_ok[NT];
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int tok = tok0 + i * 8 + g;
    tok_ok[i] = tok < p.m;
    xp[i] = reinterpret_cast<const uint4*>(p.x + static_cast<size_t>(tok_ok[i] ? tok : 0) * p.k + 16 * t);
  }

  float acc[MT][NT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j)
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[j][i][r] = 0.f;

  const uint4 z4 = make_uint4(0, 0, 0, 0);
  for (int kt0 = kb; kt0 < ke; kt0 += U) {
    uint4 wv[U][MT], xv[U][NT][2];
    uint2 sz[U][MT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kt = kt0 + u;
      const bool in = kt < ke;
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        wv[u][j] = in && row_ok[j] ? ptx::ld_stream_v4(wp[j] + static_cast<size_t>(kt) * 32) : z4;
        sz[u][j] = in && row_ok[j] ? __ldg(pp[j] + (kt >> p.group_shift) * 8) : make_uint2(0, 0);
      }
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        // X[token][64 kt + 16 t .. + 15]: 2 x 16 B (8 uint4 per 64 halves).
        const bool ok = in && tok_ok[i];
        xv[u][i][0] = ok ? __ldg(xp[i] + kt * 8) : z4;
        xv[u][i][1] = ok ? __ldg(xp[i] + kt * 8 + 1) : z4;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        const __half2 zz = bits_h2(sz[u][j].y), ss = bits_h2(sz[u][j].x);
        const __half2 z_lo = __low2half2(zz), z_hi = __high2half2(zz), s_lo = __low2half2(ss), s_hi = __high2half2(ss);
        const uint32_t words[4] = {wv[u][j].x, wv[u][j].y, wv[u][j].z, wv[u][j].w};
#pragma unroll
        for (int s = 0; s < 4; ++s) {  // k16 step s
          const uint32_t w = words[s];
          const uint32_t a0 = dequant_pair(w, z_lo, s_lo), a1 = dequant_pair(w >> 4, z_hi, s_hi);
          const uint32_t a2 = dequant_pair(w >> 8, z_lo, s_lo), a3 = dequant_pair(w >> 12, z_hi, s_hi);
#pragma unroll
          for (int i = 0; i < NT; ++i) {
            const uint4& q = xv[u][i][s >> 1];
            const uint32_t b0 = (s & 1) ? q.z : q.x, b1 = (s & 1) ? q.w : q.y;
            mma_f16_16816(acc[j][i], a0, a1, a2, a3, b0, b1);
          }
        }
      }
  }

  // Sum the WK partial tiles in warp order; fp16 store.
#pragma unroll
  for (int j = 0; j < MT; ++j)
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) red[(warp * V + (j * NT + i) * 4 + r) * 32 + lane] = acc[j][i][r];
  __syncthreads();
  for (int idx = threadIdx.x; idx < V * 32; idx += WK * 32) {
    const int v = idx >> 5, ln = idx & 31;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < WK; ++w) sum += red[(w * V + v) * 32 + ln];
    const int r = v & 3, i = (v >> 2) % NT, j = (v >> 2) / NT;
    const int ch = (t16_0 + j) * 16 + (ln >> 2) + (r >= 2 ? 8 : 0);
    const int tok = tok0 + i * 8 + 2 * (ln & 3) + (r & 1);
    if (ch < p.n && tok < p.m) p.y[static_cast<size_t>(tok) * p.n + ch] = __float2half_rn(sum);
  }
}

// Rows [16 row16_0, 16 (row16_0 + rows16)) of the weights, dequantized to fp16
// row-major [rows16 * 16][k] (rows past n are left as they are). One thread
// per (row tile, k tile, lane): 16 B in, 2 x 32 B out (rows g and g + 8).
__global__ void w4a16_dequant_kernel(const uint4* w, const uint2* params, __half* out, int row16_0, int rows16,
                                     int kt_total, int groups, int group_shift, int n, int k) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<int64_t>(rows16) * kt_total * 32) return;
  const int lane = static_cast<int>(idx & 31), g = lane >> 2, t = lane & 3;
  const int kt = static_cast<int>((idx >> 5) % kt_total), r16 = static_cast<int>((idx >> 5) / kt_total);
  const int t16 = row16_0 + r16;
  const uint4 wv = ptx::ld_stream_v4(w + (static_cast<size_t>(t16) * kt_total + kt) * 32 + lane);
  const uint2 sz = __ldg(params + (static_cast<size_t>(t16) * groups + (kt >> group_shift)) * 8 + g);
  const __half2 zz = bits_h2(sz.y), ss = bits_h2(sz.x);
  const __half2 z_lo = __low2half2(zz), z_hi = __high2half2(zz), s_lo = __low2half2(ss), s_hi = __high2half2(ss);
  const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
  uint32_t lo[8], hi[8];  // rows g, g + 8: halves 16t .. 16t + 15 of the k tile, in order
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    lo[2 * s] = dequant_pair(words[s], z_lo, s_lo);
    hi[2 * s] = dequant_pair(words[s] >> 4, z_hi, s_hi);
    lo[2 * s + 1] = dequant_pair(words[s] >> 8, z_lo, s_lo);
    hi[2 * s + 1] = dequant_pair(words[s] >> 12, z_hi, s_hi);
  }
  const int row_lo = t16 * 16 + g;
  const size_t col = static_cast<size_t>(kt) * 64 + 16 * t;
  if (row_lo < n) {
    uint4* d = reinterpret_cast<uint4*>(out + static_cast<size_t>(r16 * 16 + g) * k + col);
    d[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    d[1] = make_uint4(lo[4], lo[5], lo[6], lo[7]);
  }
  if (row_lo + 8 < n) {
    uint4* d = reinterpret_cast<uint4*>(out + static_cast<size_t>(r16 * 16 + g + 8) * k + col);
    d[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    d[1] = make_uint4(hi[4], hi[5], hi[6], hi[7]);
  }
}

}  // namespace qserve::cuda::w4a16
