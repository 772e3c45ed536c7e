// The paged attention kernel behind decode_attention and prefill_attention:
// tensor cores (mma.sync m16n8k16, fp16 x fp16 -> f32) over KV4 / KV8 / FP16
// pages, dequantized in registers.
//
// Rows of the m16 tiles are (query token, query head of the KV head's group):
// a warp owns 16 rows = 16/GP tokens x GP heads (GP = group padded to 1, 2,
// 4, 8). Decode has one token: rows 0..GP-1 are used, and the 4 warps of a
// block split the tokens of each 64-token chunk, each with its own online
// softmax state, merged at the end. Prefill has 64 rows per block (4 warps x
// 16), and every warp sees every chunk, masked causally per row.
//
// The block streams its KV range through shared memory in chunks of 64
// tokens (cp.async, 16-byte copies from the pages, 2-3 stages deep).
//
// Dequantization without float conversions: a 4-bit code t becomes the fp16
// value 1024 + t by masking its nibble into the mantissa of 1024.0 (one lop3
// for two codes); 8-bit codes by byte permutes. The 1024 + z offset leaves the
// inner loops entirely:
//   scores  S = s (q . (1024 + t) - (1024 + z) sum(q))
//   values  O = sum_j P'_j t_j - sum_j P'_j z_j,  P'_j = p_j s_j (fp16)
// with f32 accumulators (tensor cores), and the corrections computed from the
// same fp16-rounded q and P'. (Values subtract the 1024 first, one hsub2 per
// two codes: a biased sum over thousands of keys loses the small result to
// f32 rounding.)
//
// Contraction orders are permuted freely, as long as both operands agree:
//  - the head dimension of Q.K^T follows the order in which a thread's codes
//    come out of its words (kv_pair_elements);
//  - inside each 8-token tile, column n is token tau(n) = n/2 + 4 (n%2), so
//    that a thread's V rows are 4 consecutive tokens (no bank conflicts);
//  - the output columns of P.V: tile e, column n is d = n (D/8) + e.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "quant/kv_format.h"

namespace qserve::cuda::attn {

constexpr int kThreads = 128;
constexpr int kWarps = 4;
constexpr int kChunk = 64;

enum class Mode { kDecode, kPrefill };

struct Params {
  const half* q;  // decode: [batch, Hq, D]; prefill: [T, Hq, D]
  half* out;      // like q
  const uint8_t* k_pages;
  const uint8_t* v_pages;
  int64_t page_bytes;
  int32_t page_size;
  int32_t page_shift;  // log2(page_size) when page_size is a power of two, else -1
  int32_t head_block_bytes;
  int32_t values_region_bytes;
  const int32_t* context_lens;  // [batch]
  const int32_t* q_starts;      // prefill: [batch + 1]
  const int32_t* page_table;    // [batch, page_table_stride]
  int32_t page_table_stride;
  int32_t num_kv_heads;
  int32_t group;
  float scale_log2;  // softmax_scale * log2(e)
  // decode split
  int32_t batch;  // sequences (decode_mma_kernel's units: KV heads x batch x splits)
  int32_t split_tokens;
  int32_t num_splits;
  float* part_o;   // [batch, Hq, num_splits, D]
  float* part_ml;  // [batch, Hq, num_splits, 2]
  // decode_mma_kernel: stage the first keys before the programmatic-launch
  // wait (DecodePlan::stage_before_wait)
  int32_t stage_before_wait;
};

// The fields every launch (decode or prefill) shares: q / out, the pages of
// `cache` and their geometry, the page table, the GQA group, the softmax scale
// in log2 units. The mode-specific fields stay zero for the caller to set.
inline Params make_params(const void* q, void* out, const PagedKvCache& cache, const int32_t* context_lens,
                          const int32_t* page_table, int32_t page_table_stride, int num_q_heads, float softmax_scale) {
  Params p{};
  p.q = reinterpret_cast<const half*>(q);
  p.out = reinterpret_cast<half*>(out);
  p.k_pages = cache.k_pages;
  p.v_pages = cache.v_pages;
  p.page_bytes = cache.layout.page_bytes();
  p.page_size = cache.layout.page_size;
  p.page_shift = -1;
  for (int sh = 0; sh < 31; ++sh)
    if ((1 << sh) == p.page_size) p.page_shift = sh;
  p.head_block_bytes = static_cast<int32_t>(cache.layout.head_block_bytes());
  p.values_region_bytes = static_cast<int32_t>(cache.layout.values_region_bytes());
  p.context_lens = context_lens;
  p.page_table = page_table;
  p.page_table_stride = page_table_stride;
  p.num_kv_heads = cache.layout.num_kv_heads;
  p.group = num_q_heads / cache.layout.num_kv_heads;
  p.scale_log2 = softmax_scale * 1.4426950408889634f;
  return p;
}

// A decode block (sequence b, KV head kvh, split `split`) with no key to read:
// an empty split of a short sequence, or an empty context. Its query heads'
// rows are written as zeros, or, with flash-decoding splits, as the neutral
// partial state of the merge (o = 0, m = -inf, l = 0). Called by every thread
// of the block (kThreads), or by the `threads` threads serving the unit.
template <int D>
__device__ __forceinline__ void write_empty_split(const Params& p, int b, int kvh, int split, int tid,
                                                  int threads = kThreads) {
  const int group = p.group;
  const int hq = p.num_kv_heads * group;
  for (int i = tid; i < group * D; i += threads) {
    const int g = i / D, d = i % D;
    const int64_t row = static_cast<int64_t>(b) * hq + kvh * group + g;
    if (p.num_splits > 1) {
      p.part_o[(row * p.num_splits + split) * D + d] = 0.f;
      if (d == 0) {
        p.part_ml[(row * p.num_splits + split) * 2] = -INFINITY;
        p.part_ml[(row * p.num_splits + split) * 2 + 1] = 0.f;
      }
    } else {
      p.out[row * D + d] = __float2half(0.f);
    }
  }
}

// Stages positions [c0, c0 + kChunk) of one KV head (bytes head_off into each
// page) into a pipeline stage `st`: K values at st, V values at st + kHalfStage,
// each followed by the chunk's kChunk x {fp16 scale, fp16 zero} when the format
// has them. 16-byte cp.async per value piece, 4-byte per parameter pair;
// positions >= end are zero-filled (their reads are skipped). Called by every
// thread of the block (kThreads).
template <int kVB, bool kParams, int kHalfStage>
__device__ __forceinline__ void stage_kv_chunk(uint8_t* st, const Params& p, const int32_t* pages, int64_t head_off,
                                               int c0, int end, int tid) {
  constexpr int kPiecesPerTok = kVB / 16;
  constexpr int kTokPerPass = kThreads / kPiecesPerTok;
  static_assert(kThreads % kPiecesPerTok == 0 && kChunk % kTokPerPass == 0);
  const int piece = tid % kPiecesPerTok;
#pragma unroll
  for (int pass = 0; pass < kChunk / kTokPerPass; ++pass) {
    const int tok = tid / kPiecesPerTok + pass * kTokPerPass;
    const int pos = c0 + tok;
    const bool valid = pos < end;
    int64_t off = 0;
    if (valid)
      off = pages[pos / p.page_size] * p.page_bytes + head_off + static_cast<int64_t>(pos % p.page_size) * kVB +
            piece * 16;
    cp_async_16(st + tok * kVB + piece * 16, p.k_pages + off, valid ? 16 : 0);
    cp_async_16(st + kHalfStage + tok * kVB + piece * 16, p.v_pages + off, valid ? 16 : 0);
  }
  if constexpr (kParams) {
    if (tid < kChunk) {
      const int pos = c0 + tid;
      const bool valid = pos < end;
      int64_t off = 0;
      if (valid) off = pages[pos / p.page_size] * p.page_bytes + head_off + p.values_region_bytes + (pos % p.page_size) * 4;
      cp_async_4(st + kChunk * kVB + tid * 4, p.k_pages + off, valid ? 4 : 0);
      cp_async_4(st + kHalfStage + kChunk * kVB + tid * 4, p.v_pages + off, valid ? 4 : 0);
    }
  }
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <KvDtype DT, int D>
struct Geometry {
  static constexpr int kBits = kv_bits(DT);
  static constexpr int kVB = D * kBits / 8;  // token value bytes
  static constexpr bool kParams = kv_has_params(DT);
  static constexpr int kStages = DT == KvDtype::kFp16 ? 2 : 3;
  static constexpr int kHalfStage = kChunk * kVB + (kParams ? kChunk * 4 : 0);  // values, then {scale, zero}
  static constexpr int kStageBytes = 2 * kHalfStage;                            // K, then V
  static constexpr int kPipeBytes = kStages * kStageBytes;
  static constexpr int kKBytes = kVB / 4;  // bytes of a key row per thread (4 threads per key)
  static constexpr int kVBytes = kVB / 8;  // bytes of a value row per thread (8 threads per row)
  static constexpr int kSlices = D / 8;    // half2 per thread per key; n8 tiles of the output
  static constexpr int kKSteps = D / 16;
};

// Element indices (lo, hi) of the i-th half2 of thread c's key slice.
template <KvDtype DT, int D>
__device__ __forceinline__ int kv_pair_element(int c, int i, int hi) {
  if constexpr (DT == KvDtype::kInt4) {
    constexpr int W = D / 32;  // words per thread
    return 8 * (W * c + i / 4) + i % 4 + 4 * hi;
  } else if constexpr (DT == KvDtype::kInt8) {
    constexpr int W = D / 16;
    return 4 * (W * c + i / 2) + 2 * (i % 2) + hi;
  } else {
    return (D / 4) * c + 2 * i + hi;
  }
}

// A thread's key slice (kKBytes at src) -> kSlices half2 of biased codes (or fp16 values).
template <KvDtype DT, int D>
__device__ __forceinline__ void load_key(const uint8_t* src, uint32_t (&kb)[D / 8]) {
  using G = Geometry<DT, D>;
  constexpr int kWords = G::kKBytes / 4;
  uint32_t w[kWords];
#pragma unroll
  for (int j = 0; j < kWords; j += 4) {
    if constexpr (kWords >= 4) {
      const uint4 u = *reinterpret_cast<const uint4*>(src + 4 * j);
      w[j] = u.x, w[j + 1] = u.y, w[j + 2] = u.z, w[j + 3] = u.w;
    }
  }
  if constexpr (kWords == 2) {
    const uint2 u = *reinterpret_cast<const uint2*>(src);
    w[0] = u.x, w[1] = u.y;
  }
  if constexpr (DT == KvDtype::kInt4) {
#pragma unroll
    for (int j = 0; j < kWords; ++j)
#pragma unroll
      for (int m = 0; m < 4; ++m) kb[4 * j + m] = lop3_and_or(w[j] >> (4 * m), 0x000F000Fu, 0x64006400u);
  } else if constexpr (DT == KvDtype::kInt8) {
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      kb[2 * j] = __byte_perm(w[j], 0x64646464u, 0x4140);
      kb[2 * j + 1] = __byte_perm(w[j], 0x64646464u, 0x4342);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kWords; ++j) kb[j] = w[j];
  }
}

// Value slices of two tokens a, b (kVBytes each) -> kSlices half2 (a_e, b_e).
template <KvDtype DT, int D>
__device__ __forceinline__ void load_value_pair(const uint8_t* a, const uint8_t* b, uint32_t (&vb)[D / 8]) {
  using G = Geometry<DT, D>;
  constexpr int kWords = G::kVBytes / 4;
  const half2 kBias = __half2half2(__ushort_as_half(0x6400));  // 1024
  uint32_t wa[kWords], wb[kWords];
  if constexpr (kWords == 1) {
    wa[0] = *reinterpret_cast<const uint32_t*>(a);
    wb[0] = *reinterpret_cast<const uint32_t*>(b);
  } else if constexpr (kWords == 2) {
    const uint2 ua = *reinterpret_cast<const uint2*>(a), ub = *reinterpret_cast<const uint2*>(b);
    wa[0] = ua.x, wa[1] = ua.y, wb[0] = ub.x, wb[1] = ub.y;
  } else {
#pragma unroll
    for (int j = 0; j < kWords; j += 4) {
      const uint4 ua = *reinterpret_cast<const uint4*>(a + 4 * j), ub = *reinterpret_cast<const uint4*>(b + 4 * j);
      wa[j] = ua.x, wa[j + 1] = ua.y, wa[j + 2] = ua.z, wa[j + 3] = ua.w;
      wb[j] = ub.x, wb[j + 1] = ub.y, wb[j + 2] = ub.z, wb[j + 3] = ub.w;
    }
  }
  if constexpr (DT == KvDtype::kInt4) {
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      const uint32_t lo = __byte_perm(wa[j], wb[j], 0x5410), hi = __byte_perm(wa[j], wb[j], 0x7632);
      // codes t exact in fp16 (1024 + t - 1024): a biased sum over many keys
      // would cancel in f32 at long contexts
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        vb[8 * j + k] = as_u32(__hsub2(as_half2(lop3_and_or(lo >> (4 * k), 0x000F000Fu, 0x64006400u)), kBias));
        vb[8 * j + 4 + k] = as_u32(__hsub2(as_half2(lop3_and_or(hi >> (4 * k), 0x000F000Fu, 0x64006400u)), kBias));
      }
    }
  } else if constexpr (DT == KvDtype::kInt8) {
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      const uint32_t t0 = __byte_perm(wa[j], wb[j], 0x5140), t1 = __byte_perm(wa[j], wb[j], 0x7362);
      vb[4 * j] = as_u32(__hsub2(as_half2(__byte_perm(t0, 0x64646464u, 0x4140)), kBias));
      vb[4 * j + 1] = as_u32(__hsub2(as_half2(__byte_perm(t0, 0x64646464u, 0x4342)), kBias));
      vb[4 * j + 2] = as_u32(__hsub2(as_half2(__byte_perm(t1, 0x64646464u, 0x4140)), kBias));
      vb[4 * j + 3] = as_u32(__hsub2(as_half2(__byte_perm(t1, 0x64646464u, 0x4342)), kBias));
    }
  } else {
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      vb[2 * j] = __byte_perm(wa[j], wb[j], 0x5410);
      vb[2 * j + 1] = __byte_perm(wa[j], wb[j], 0x7632);
    }
  }
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) { return as_u32(__floats2half2_rn(lo, hi)); }

// KV4 decode is capped at 128 registers (4 blocks per SM; a few bytes of
// spills at d = 128): faster on the H200; KV8 / FP16 were slower so.
template <KvDtype DT, int D, int GP, Mode MODE>
__global__ void __launch_bounds__(kThreads, MODE == Mode::kDecode && DT == KvDtype::kInt4 ? 4 : 1) paged_attention_kernel(const Params p) {
  using G = Geometry<DT, D>;
  constexpr bool kPrefill = MODE == Mode::kPrefill;
  constexpr bool kRow1 = kPrefill || GP > 8;  // rows 8..15 of the m16 tile in use
  constexpr int kTokPerWarp = kPrefill ? 16 / GP : 1;
  constexpr int kTiles = kPrefill ? kChunk / 8 : 2;  // n8 key tiles per warp per chunk
  extern __shared__ __align__(16) uint8_t smem[];

  const int kvh = blockIdx.x, b = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g8 = lane / 4, c = lane % 4;
  const int group = p.group;
  const int hq = p.num_kv_heads * group;
  const int ctx = p.context_lens[b];

  // ---- which rows, which keys -----------------------------------------------
  int num_new = 1, tok0 = 0, q_row0 = b;  // q row of this block's first token
  int begin = 0, end = ctx;
  if constexpr (kPrefill) {
    q_row0 = p.q_starts[b];
    num_new = p.q_starts[b + 1] - q_row0;
    tok0 = blockIdx.z * (kWarps * kTokPerWarp);
    if (tok0 >= num_new) return;
    const int last_tok = min(num_new, tok0 + kWarps * kTokPerWarp) - 1;
    end = ctx - num_new + last_tok + 1;  // causal: the block's last row sees keys < end
  } else {
    begin = blockIdx.z * p.split_tokens;
    end = min(ctx, begin + p.split_tokens);
  }
  // rows r0 = g8, r1 = g8 + 8 of this warp
  int row_tok[2], row_g[2], row_pos[2];
  bool row_ok[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g8 + 8 * h;
    row_tok[h] = tok0 + (kPrefill ? warp * kTokPerWarp + r / GP : 0);
    row_g[h] = r % GP;
    row_ok[h] = r / GP < kTokPerWarp && row_g[h] < group && row_tok[h] < num_new && (h == 0 || kRow1);
    row_pos[h] = ctx - num_new + row_tok[h];
  }

  if (begin >= end) {  // decode: an empty split, or an empty context
    if (warp == 0 && row_ok[0]) {
      const int64_t row = static_cast<int64_t>(b) * hq + kvh * group + row_g[0];
      for (int d = c; d < D; d += 4) {
        if (p.num_splits > 1) {
          p.part_o[(row * p.num_splits + blockIdx.z) * D + d] = 0.f;
        } else {
          p.out[row * D + d] = __float2half(0.f);
        }
      }
      if (p.num_splits > 1 && c == 0) {
        p.part_ml[(row * p.num_splits + blockIdx.z) * 2] = -INFINITY;
        p.part_ml[(row * p.num_splits + blockIdx.z) * 2 + 1] = 0.f;
      }
    }
    return;
  }

  // ---- queries as A fragments (pre-scaled, fp16), and their row sums --------
  uint32_t qa[G::kKSteps][4];
  float sumq[2] = {0.f, 0.f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const half* qrow = p.q + (static_cast<int64_t>(q_row0 + row_tok[h]) * hq + kvh * group + row_g[h]) * D;
#pragma unroll
    for (int kk = 0; kk < G::kKSteps; ++kk)
#pragma unroll
      for (int reg = 0; reg < 2; ++reg) {
        float v[2] = {0.f, 0.f};
        if (row_ok[h]) {
#pragma unroll
          for (int hi = 0; hi < 2; ++hi)
            v[hi] = __half2float(__float2half_rn(__half2float(qrow[kv_pair_element<DT, D>(c, 2 * kk + reg, hi)]) * p.scale_log2));
        }
        qa[kk][h + 2 * reg] = pack_half2(v[0], v[1]);
        sumq[h] += v[0] + v[1];
      }
    sumq[h] += __shfl_xor_sync(0xffffffffu, sumq[h], 1);
    sumq[h] += __shfl_xor_sync(0xffffffffu, sumq[h], 2);
  }

  // ---- the copy pipeline (all threads) --------------------------------------
  const int num_chunks = (end - begin + kChunk - 1) / kChunk;
  const int32_t* pages = p.page_table + static_cast<int64_t>(b) * p.page_table_stride;
  const int64_t head_off = static_cast<int64_t>(kvh) * p.head_block_bytes;
  auto issue_chunk = [&](int chunk, int stage) {
    stage_kv_chunk<G::kVB, G::kParams, G::kHalfStage>(smem + stage * G::kStageBytes, p, pages,
                                                       head_off, begin + chunk * kChunk, end, tid);
  };
#pragma unroll
  for (int s = 0; s < G::kStages - 1; ++s) {
    if (s < num_chunks) issue_chunk(s, s);
    cp_async_commit();
  }

  // ---- per-warp online softmax state ------------------------------------------
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, corr[2] = {0.f, 0.f};
  float o[G::kSlices][4];
#pragma unroll
  for (int e = 0; e < G::kSlices; ++e) o[e][0] = o[e][1] = o[e][2] = o[e][3] = 0.f;
  const int tau0 = c, tau1 = c + 4;  // tokens of columns 2c, 2c+1 inside an 8-token tile
  const int key_tok = g8 / 2 + 4 * (g8 % 2);  // tau(g8): the key row this thread loads in a tile

  for (int ci = 0; ci < num_chunks; ++ci) {
    cp_async_wait<G::kStages - 2>();
    __syncthreads();
    {
      const int next = ci + G::kStages - 1;
      if (next < num_chunks) issue_chunk(next, next % G::kStages);
      cp_async_commit();
    }
    const uint8_t* kst = smem + (ci % G::kStages) * G::kStageBytes;
    const uint8_t* vst = kst + G::kHalfStage;
    const int c0 = begin + ci * kChunk;
    const int wt0 = kPrefill ? 0 : warp * 16;  // first token (in the chunk) of this warp's tiles
    if (c0 + wt0 >= end) continue;  // decode: this warp's tokens are all past the end

    // 1. scores S = Q K^T for kTiles tiles of 8 keys
    float s[kTiles][4];
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
      uint32_t kb[G::kSlices];
      load_key<DT, D>(kst + (wt0 + 8 * t + key_tok) * G::kVB + c * G::kKBytes, kb);
#pragma unroll
      for (int kk = 0; kk < G::kKSteps; ++kk) mma_16816(s[t], qa[kk], kb[2 * kk], kb[2 * kk + 1]);
      // scale, zero point, masks
#pragma unroll
      for (int col = 0; col < 2; ++col) {
        const int tok = wt0 + 8 * t + (col ? tau1 : tau0);
        const int pos = c0 + tok;
        float sc = 1.f, zb = 0.f;
        if constexpr (G::kParams) {
          const half2 sz = *reinterpret_cast<const half2*>(kst + kChunk * G::kVB + tok * 4);
          sc = __low2float(sz);
          zb = 1024.f + __high2float(sz);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v = s[t][2 * h + col];
          if constexpr (G::kParams) v = sc * (v - zb * sumq[h]);
          const bool visible = pos < end && (!kPrefill || pos <= row_pos[h]);
          s[t][2 * h + col] = visible ? v : -INFINITY;
        }
      }
    }
    // 2. online softmax per row (4 threads share a row)
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) mx = fmaxf(mx, fmaxf(s[t][2 * h], s[t][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[h], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet
      alpha[h] = exp2f(m[h] - m_use);
      m[h] = m_new;
      l[h] *= alpha[h];
      corr[h] *= alpha[h];
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int col = 0; col < 2; ++col) s[t][2 * h + col] = exp2f(s[t][2 * h + col] - m_use);
    }
#pragma unroll
    for (int e = 0; e < G::kSlices; ++e) {
      o[e][0] *= alpha[0];
      o[e][1] *= alpha[0];
      o[e][2] *= alpha[1];
      o[e][3] *= alpha[1];
    }
    // 3. O += P' V, 16 keys (two tiles) per k-step
#pragma unroll
    for (int ks = 0; ks < kTiles / 2; ++ks) {
      uint32_t pa[4];
#pragma unroll
      for (int half_tile = 0; half_tile < 2; ++half_tile) {
        const int t = 2 * ks + half_tile;
        float sv[2] = {1.f, 1.f}, zv[2] = {0.f, 0.f};
#pragma unroll
        for (int col = 0; col < 2; ++col) {
          if constexpr (G::kParams) {
            const int tok = wt0 + 8 * t + (col ? tau1 : tau0);
            const half2 sz = *reinterpret_cast<const half2*>(vst + kChunk * G::kVB + tok * 4);
            sv[col] = __low2float(sz);
            zv[col] = __high2float(sz);
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          l[h] += s[t][2 * h] + s[t][2 * h + 1];
          const half2 pp = __floats2half2_rn(s[t][2 * h] * sv[0], s[t][2 * h + 1] * sv[1]);
          pa[h + 2 * half_tile] = as_u32(pp);
          if constexpr (G::kParams) corr[h] += __low2float(pp) * zv[0] + __high2float(pp) * zv[1];
        }
      }
      const int vt = wt0 + 16 * ks;  // first key of this k-step
      uint32_t vb0[G::kSlices], vb1[G::kSlices];
      load_value_pair<DT, D>(vst + (vt + tau0) * G::kVB + g8 * G::kVBytes, vst + (vt + tau1) * G::kVB + g8 * G::kVBytes, vb0);
      load_value_pair<DT, D>(vst + (vt + 8 + tau0) * G::kVB + g8 * G::kVBytes,
                             vst + (vt + 8 + tau1) * G::kVB + g8 * G::kVBytes, vb1);
#pragma unroll
      for (int e = 0; e < G::kSlices; ++e) mma_16816(o[e], pa, vb0[e], vb1[e]);
    }
  }

  // ---- finish: row sums over the 4 threads of a row ---------------------------
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    corr[h] += __shfl_xor_sync(0xffffffffu, corr[h], 1);
    corr[h] += __shfl_xor_sync(0xffffffffu, corr[h], 2);
  }
  // output column of o[e][k]: d = (2c + k%2) (D/8) + e
  if constexpr (kPrefill) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!row_ok[h]) continue;
      half* orow = p.out + (static_cast<int64_t>(q_row0 + row_tok[h]) * hq + kvh * group + row_g[h]) * D;
      const float inv = 1.f / l[h];
#pragma unroll
      for (int e = 0; e < G::kSlices; ++e)
#pragma unroll
        for (int k = 0; k < 2; ++k) orow[(2 * c + k) * (D / 8) + e] = __float2half_rn((o[e][2 * h + k] - corr[h]) * inv);
    }
  } else {
    // merge the 4 warps' states: [warp][row < GP] {m, l, corr} and O [warp][row][D]
    cp_async_wait<0>();
    __syncthreads();
    constexpr int kRows = GP < 16 ? GP : 16;
    float* s_o = reinterpret_cast<float*>(smem);                  // [kWarps][kRows][D]
    float* s_state = s_o + kWarps * kRows * D;                    // [kWarps][kRows][3]
    const bool warp_live = begin + warp * 16 < end;               // warps past the end saw no keys
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = g8 + 8 * h;
      if (r >= kRows) continue;
      float* so = s_o + (warp * kRows + r) * D;
#pragma unroll
      for (int e = 0; e < G::kSlices; ++e)
#pragma unroll
        for (int k = 0; k < 2; ++k) so[(2 * c + k) * (D / 8) + e] = warp_live ? o[e][2 * h + k] - corr[h] : 0.f;
      if (c == 0) {
        s_state[(warp * kRows + r) * 3] = warp_live ? m[h] : -INFINITY;
        s_state[(warp * kRows + r) * 3 + 1] = warp_live ? l[h] : 0.f;
      }
    }
    __syncthreads();
    for (int i = tid; i < group * D; i += kThreads) {
      const int r = i / D, d = i % D;
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_state[(w * kRows + r) * 3]);
      float num = 0.f, den = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float lw = s_state[(w * kRows + r) * 3 + 1];
        if (lw > 0.f) {
          const float wt = exp2f(s_state[(w * kRows + r) * 3] - mx);
          num += wt * s_o[(w * kRows + r) * D + d];
          den += wt * lw;
        }
      }
      const int64_t row = static_cast<int64_t>(b) * hq + kvh * group + r;
      if (p.num_splits == 1) {
        p.out[row * D + d] = __float2half_rn(num / den);
      } else {
        p.part_o[(row * p.num_splits + blockIdx.z) * D + d] = num;
        if (d == 0) {
          p.part_ml[(row * p.num_splits + blockIdx.z) * 2] = mx;
          p.part_ml[(row * p.num_splits + blockIdx.z) * 2 + 1] = den;
        }
      }
    }
  }
}

template <KvDtype DT, int D, int GP, Mode MODE>
constexpr int smem_bytes() {
  using G = Geometry<DT, D>;
  constexpr int kRows = GP < 16 ? GP : 16;
  constexpr int merge = MODE == Mode::kDecode ? kWarps * kRows * (D + 3) * 4 : 0;
  return G::kPipeBytes > merge ? G::kPipeBytes : merge;
}

}  // namespace qserve::cuda::attn
