// The CUDA-core (SIMT) decode kernel for GQA groups of 1 and 2
// (DecodeKernel::kSimt; the default is the keys-in-M tensor-core kernel,
// decode_mma_kernel.cuh, faster on the H200 at batch >= 16: see
// bench/results/2026-11-29-attention-h200-r2.md). One block per (KV head,
// sequence, split).
//
// The block streams its token range in chunks of 64 tokens through shared
// memory (cp.async, 2-3 stages deep, 16-byte copies straight from the pages),
// and per chunk:
//   1. scores: each thread dots a 16-element slice of the G query heads
//      (registers, pre-scaled by softmax_scale * log2 e) with a slice of a key;
//      slices are summed with warp shuffles;
//   2. online softmax (one warp per query head): running max m, sum l, and
//      for quantized values the zero-point correction c = sum_j p_j z_j s_j;
//   3. values: acc += (p_j s_j) * codes_j in fp16 over the chunk, flushed to
//      f32 accumulators, so that out = (acc - c) / l.
// Dequantization never converts per element: 4-bit codes become fp16 by
// masking nibbles into the mantissa of 1024.0 (one lop3 per two elements,
// plus a shift) and subtracting 1024 (one hsub2); 8-bit codes by one byte
// permute. For KV4 keys the zero point leaves the inner loop too:
// q.k = s (q.codes - z sum(q)).
#pragma once

#include <cuda_fp16.h>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "backend/cuda/attention/paged_attention_kernel.cuh"  // attn::Params, kThreads, kWarps, kChunk

namespace qserve::cuda::simt {

using attn::kChunk;
using attn::kThreads;
using attn::kWarps;


template <KvDtype DT, int D, int G>
struct SimtTraits {
  static constexpr int kBits = kv_bits(DT);
  static constexpr int kVB = D * kBits / 8;  // token value bytes
  static constexpr bool kParams = kv_has_params(DT);
  static constexpr int kStages = DT == KvDtype::kFp16 ? 2 : 3;
  // scores: 16 elements of one key per thread
  static constexpr int kEK = 16;
  static constexpr int kSK = D / kEK;         // threads per key
  static constexpr int kLK = kThreads / kSK;  // keys in flight per block
  static constexpr int kTK = kChunk / kLK;    // keys per thread per chunk
  // values: kEV elements of one value row per thread
  static constexpr int kEV = G >= 4 ? 8 : 16;
  static constexpr int kSV = D / kEV;
  static constexpr int kLV = kThreads / kSV;
  static constexpr int kTV = kChunk / kLV;
  // shared memory: stages of [K values][K params][V values][V params]
  static constexpr int kValBytes = kChunk * kVB;
  static constexpr int kParBytes = kParams ? kChunk * 4 : 0;
  static constexpr int kHalfStage = kValBytes + kParBytes;
  static constexpr int kStageBytes = 2 * kHalfStage;
  static constexpr int kPipeBytes = kStages * kStageBytes;
  static constexpr int kReduceBytes = kWarps * G * D * 4;
  static constexpr int kMainBytes = kPipeBytes > kReduceBytes ? kPipeBytes : kReduceBytes;
  static constexpr int kSmemBytes = kMainBytes + G * kChunk * 4 /*logits*/ + G * kChunk * 4 /*p*s*/ + 4 * G * 4;
  static_assert(kSK * kLK == kThreads && kLK * kTK == kChunk && kSV * kLV == kThreads && kLV * kTV == kChunk);
  static_assert(kLV <= kThreads && kSV <= 32);
};


// Element index (inside a thread's slice) of the low / high half of half2 k.
template <KvDtype DT>
__device__ __forceinline__ constexpr int slot_element(int k, int hi) {
  if constexpr (DT == KvDtype::kInt4) return 8 * (k / 4) + (k % 4) + 4 * hi;  // nibble pairs (n, n + 4)
  else return 2 * k + hi;
}

// Loads the E codes (or fp16 values) at `src` as E/2 half2: codes exact, unbiased.
template <KvDtype DT, int E>
__device__ __forceinline__ void load_slice(const uint8_t* src, half2 (&v)[E / 2]) {
  const half2 bias = __half2half2(__ushort_as_half(0x6400));  // 1024
  if constexpr (DT == KvDtype::kInt4) {
    uint32_t w[E / 8];
    if constexpr (E == 16) {
      const uint2 u = *reinterpret_cast<const uint2*>(src);
      w[0] = u.x;
      w[1] = u.y;
    } else {
      w[0] = *reinterpret_cast<const uint32_t*>(src);
    }
#pragma unroll
    for (int j = 0; j < E / 8; ++j)
#pragma unroll
      for (int m = 0; m < 4; ++m) v[4 * j + m] = __hsub2(nibble_pair_biased(w[j] >> (4 * m)), bias);
  } else if constexpr (DT == KvDtype::kInt8) {
    uint32_t w[E / 4];
    if constexpr (E == 16) {
      const uint4 u = *reinterpret_cast<const uint4*>(src);
      w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
    } else {
      const uint2 u = *reinterpret_cast<const uint2*>(src);
      w[0] = u.x, w[1] = u.y;
    }
#pragma unroll
    for (int j = 0; j < E / 4; ++j) {
      v[2 * j] = __hsub2(byte_pair_biased_lo(w[j]), bias);
      v[2 * j + 1] = __hsub2(byte_pair_biased_hi(w[j]), bias);
    }
  } else {
#pragma unroll
    for (int j = 0; j < E / 8; ++j) {
      const uint4 u = reinterpret_cast<const uint4*>(src)[j];
      v[4 * j] = as_half2(u.x);
      v[4 * j + 1] = as_half2(u.y);
      v[4 * j + 2] = as_half2(u.z);
      v[4 * j + 3] = as_half2(u.w);
    }
  }
}

template <KvDtype DT, int D, int G>
__global__ void __launch_bounds__(kThreads) decode_simt_kernel(const attn::Params p) {
  using T = SimtTraits<DT, D, G>;
  extern __shared__ __align__(16) uint8_t smem[];
  float* s_logit = reinterpret_cast<float*>(smem + T::kMainBytes);  // [G][kChunk]
  half2* s_ps = reinterpret_cast<half2*>(s_logit + G * kChunk);     // [G][kChunk]
  float* s_m = reinterpret_cast<float*>(s_ps + G * kChunk);         // [G]
  float* s_l = s_m + G;
  float* s_c = s_l + G;
  float* s_alpha = s_c + G;

  const int kvh = blockIdx.x, b = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = p.group;
  const int hq = p.num_kv_heads * group;
  const int ctx = p.context_lens[b];
  const int begin = split * p.split_tokens;
  const int end = min(ctx, begin + p.split_tokens);

  if (begin >= end) {  // an empty split (short sequence) or an empty context
    attn::write_empty_split<D>(p, b, kvh, split, tid);
    return;
  }

  // ---- the group's queries, this thread's 16-element slice -----------------
  const int ks = tid % T::kSK, kl = tid / T::kSK;
  half2 qreg[G][T::kEK / 2];
  float sumq[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float part = 0.f;
    const half* qh = p.q + (static_cast<int64_t>(b) * hq + kvh * group + g) * D + ks * T::kEK;
#pragma unroll
    for (int k = 0; k < T::kEK / 2; ++k) {
      float lo = 0.f, hi = 0.f;
      if (g < group) {
        lo = __half2float(__float2half_rn(__half2float(qh[slot_element<DT>(k, 0)]) * p.scale_log2));
        hi = __half2float(__float2half_rn(__half2float(qh[slot_element<DT>(k, 1)]) * p.scale_log2));
      }
      qreg[g][k] = __floats2half2_rn(lo, hi);
      part += lo + hi;
    }
#pragma unroll
    for (int o = 1; o < T::kSK; o <<= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
    sumq[g] = part;
  }

  for (int i = tid; i < G * kChunk; i += kThreads) s_ps[i] = __float2half2_rn(0.f);
  if (tid < G) s_alpha[tid] = 1.f;
  // the running softmax state of head `warp` (G <= kWarps), lane-replicated in
  // registers; shared memory only publishes alpha per chunk and the final state
  static_assert(G <= kWarps);
  float m_run = -INFINITY, l_run = 0.f, c_run = 0.f;

  // ---- the copy pipeline -----------------------------------------------------
  const int num_chunks = (end - begin + kChunk - 1) / kChunk;
  const int32_t* pages = p.page_table + static_cast<int64_t>(b) * p.page_table_stride;
  const int64_t head_off = static_cast<int64_t>(kvh) * p.head_block_bytes;
  // Copies chunk `chunk` (64 positions from begin + 64 chunk) of K and V into
  // stage `stage`; positions past `end` are zero-filled. A token's K and V
  // sit at the same offset of their pools, so one page lookup serves both.
  auto issue_chunk = [&](int chunk, int stage) {
    attn::stage_kv_chunk<T::kVB, T::kParams, T::kHalfStage>(smem + stage * T::kStageBytes, p, pages,
                                                             head_off, begin + chunk * kChunk, end, tid);
  };

#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < num_chunks) issue_chunk(s, s);
    cp_async_commit();
  }

  const int vs = tid % T::kSV, vl = tid / T::kSV;
  float acc[G][T::kEV];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int e = 0; e < T::kEV; ++e) acc[g][e] = 0.f;

  for (int ci = 0; ci < num_chunks; ++ci) {
    cp_async_wait<T::kStages - 2>();
    __syncthreads();
    {
      const int next = ci + T::kStages - 1;
      if (next < num_chunks) issue_chunk(next, next % T::kStages);
      cp_async_commit();
    }
    const uint8_t* st = smem + (ci % T::kStages) * T::kStageBytes;
    const int c0 = begin + ci * kChunk;

    // 1. scores
#pragma unroll
    for (int i = 0; i < T::kTK; ++i) {
      const int tok = kl + i * T::kLK;
      half2 kv[T::kEK / 2];
      load_slice<DT, T::kEK>(st + tok * T::kVB + ks * (T::kEK * T::kBits / 8), kv);
      float sc = 1.f, zr = 0.f;
      if constexpr (T::kParams) {
        const half2 sz = *reinterpret_cast<const half2*>(st + T::kValBytes + tok * 4);
        sc = __low2float(sz);
        zr = __high2float(sz);
        if constexpr (DT == KvDtype::kInt8) {
          // 8-bit codes reach 255: q . codes - z sum(q) would cancel two large
          // fp16 sums, so subtract z per element (exact in fp16) instead.
          const half2 z2 = __half2half2(__high2half(sz));
#pragma unroll
          for (int k = 0; k < T::kEK / 2; ++k) kv[k] = __hsub2(kv[k], z2);
        }
      }
      float part[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        half2 a = __hmul2(qreg[g][0], kv[0]);
#pragma unroll
        for (int k = 1; k < T::kEK / 2; ++k) a = __hfma2(qreg[g][k], kv[k], a);
        part[g] = __low2float(a) + __high2float(a);
      }
#pragma unroll
      for (int o = 1; o < T::kSK; o <<= 1)
#pragma unroll
        for (int g = 0; g < G; ++g) part[g] += __shfl_xor_sync(0xffffffffu, part[g], o);
      if (ks == 0) {
        const bool valid = c0 + tok < end;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          float score = part[g];
          if constexpr (DT == KvDtype::kInt4) score = sc * (part[g] - zr * sumq[g]);
          if constexpr (DT == KvDtype::kInt8) score = sc * part[g];
          s_logit[g * kChunk + tok] = valid ? score : -INFINITY;
        }
      }
    }
    __syncthreads();

    // 2. online softmax, one warp per query head
    {
      const int g = warp;
      if (g < G && g < group) {
        const float x0 = s_logit[g * kChunk + lane], x1 = s_logit[g * kChunk + lane + 32];
        const float m_old = m_run;
        const float m_new = fmaxf(m_old, warp_max(fmaxf(x0, x1)));
        const float alpha = exp2f(m_old - m_new);
        const float p0 = exp2f(x0 - m_new), p1 = exp2f(x1 - m_new);
        float ps0 = p0, ps1 = p1, pz = 0.f;
        if constexpr (T::kParams) {
          const half2 sz0 = *reinterpret_cast<const half2*>(st + T::kHalfStage + T::kValBytes + lane * 4);
          const half2 sz1 = *reinterpret_cast<const half2*>(st + T::kHalfStage + T::kValBytes + (lane + 32) * 4);
          ps0 = p0 * __low2float(sz0);
          ps1 = p1 * __low2float(sz1);
          pz = ps0 * __high2float(sz0) + ps1 * __high2float(sz1);
        }
        s_ps[g * kChunk + lane] = __float2half2_rn(ps0);
        s_ps[g * kChunk + lane + 32] = __float2half2_rn(ps1);
        const float lsum = warp_sum(p0 + p1);
        if constexpr (T::kParams) pz = warp_sum(pz);
        m_run = m_new;
        l_run = l_run * alpha + lsum;
        c_run = c_run * alpha + pz;
        if (lane == 0) s_alpha[g] = alpha;
      }
    }
    __syncthreads();

    // 3. values
    half2 acch[G][T::kEV / 2];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float alpha = s_alpha[g];
#pragma unroll
      for (int e = 0; e < T::kEV; ++e) acc[g][e] *= alpha;
#pragma unroll
      for (int k = 0; k < T::kEV / 2; ++k) acch[g][k] = __float2half2_rn(0.f);
    }
#pragma unroll
    for (int i = 0; i < T::kTV; ++i) {
      const int tok = vl + i * T::kLV;
      half2 v[T::kEV / 2];
      load_slice<DT, T::kEV>(st + T::kHalfStage + tok * T::kVB + vs * (T::kEV * T::kBits / 8), v);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const half2 w = s_ps[g * kChunk + tok];
#pragma unroll
        for (int k = 0; k < T::kEV / 2; ++k) acch[g][k] = __hfma2(w, v[k], acch[g][k]);
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int k = 0; k < T::kEV / 2; ++k) {
        acc[g][2 * k] += __low2float(acch[g][k]);
        acc[g][2 * k + 1] += __high2float(acch[g][k]);
      }
  }

  // ---- reduce the value accumulators over the block's token lanes ----------
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int o = T::kSV; o < 32; o <<= 1)
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int e = 0; e < T::kEV; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
  if (warp < G && lane == 0) {
    s_m[warp] = m_run;
    s_l[warp] = l_run;
    s_c[warp] = c_run;
  }
  float* red = reinterpret_cast<float*>(smem);  // [kWarps][G][D]
  if (lane < T::kSV) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int k = 0; k < T::kEV / 2; ++k)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi)
          red[(warp * G + g) * D + vs * T::kEV + slot_element<DT>(k, hi)] = acc[g][2 * k + hi];
  }
  __syncthreads();
  for (int i = tid; i < group * D; i += kThreads) {
    const int g = i / D, d = i % D;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += red[(w * G + g) * D + d];
    v -= s_c[g];
    const int64_t row = static_cast<int64_t>(b) * hq + kvh * group + g;
    if (p.num_splits == 1) {
      p.out[row * D + d] = __float2half_rn(v / s_l[g]);
    } else {
      p.part_o[(row * p.num_splits + split) * D + d] = v;
      if (d == 0) {
        p.part_ml[(row * p.num_splits + split) * 2] = s_m[g];
        p.part_ml[(row * p.num_splits + split) * 2 + 1] = s_l[g];
      }
    }
  }
}

template <KvDtype DT, int D, int G>
constexpr int smem_bytes() {
  return SimtTraits<DT, D, G>::kSmemBytes;
}

}  // namespace qserve::cuda::simt
