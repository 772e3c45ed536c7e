// The pieces of the tensor-core decode kernel (decode_mma_kernel.cuh) below
// the kernel itself: its compile-time geometry (MmaTraits: bytes per key,
// stage layout, shared memory), the shared-memory swizzle, and the register
// fragments' helpers (key and value dequantization, the P' buffer's
// transposed load, exp2 on the special-function unit). The layouts are
// described at the top of decode_mma_kernel.cuh.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "backend/cuda/attention/paged_attention_kernel.cuh"  // attn::kThreads, kWarps, kv_pair_element

namespace qserve::cuda::mmat {

using attn::kThreads;
using attn::kWarps;

// The most units (sequence, KV head, split) one block serves (the table in
// shared memory): block x serves units x, x + gridDim.x, ... (one each when the
// grid covers every unit; several in the persistent grid of DecodePlan).
constexpr int kMaxUnits = 8;

template <KvDtype DT, int D>
struct MmaTraits {
  static constexpr int kBits = kv_bits(DT);
  static constexpr int kVB = D * kBits / 8;  // token value bytes
  static constexpr bool kParams = kv_has_params(DT);
  static constexpr int kWK = kVB >= 256 ? 16 : 32;  // keys per warp-chunk
  static constexpr int kTiles = kWK / 16;
  static constexpr int kStages = 3;
  // resident blocks per SM the kernel is built for (its launch bounds; the
  // shared memory below fits that many)
  static constexpr int kBlocksPerSm = DT == KvDtype::kInt4 ? 4 : 2;
  static constexpr int kKB = kVB / 4;  // key bytes per thread (4 threads per key row)
  static constexpr int kVT = kVB / 8;  // value bytes per thread per key (8 slices)
  // a stage: K values [kWK][kVB], V values [kWK][kVB], then per key the K
  // and the V {scale, zero} side by side (one 8-byte read brings both)
  static constexpr int kValBytes = kWK * kVB;
  static constexpr int kVOff = kValBytes;
  static constexpr int kParOff = 2 * kValBytes;
  static constexpr int kParBytes = kParams ? kWK * 8 : 0;
  static constexpr int kStageBytes = 2 * kValBytes + kParBytes;
  static constexpr int kWarpRing = kStages * kStageBytes;
  static constexpr int kPBytes = kWK * 8 * 2;  // per warp: P' [kWK keys][8 heads] fp16
  static constexpr int kPipeBytes = kWarps * (kWarpRing + kPBytes);
  static constexpr int kMergeBytes = kWarps * 8 * (D + 4) * 4 + kWarps * 8 * 2 * 4;  // the last unit's merge
  // after the rings: the unit table, then the merge area of the other units
  // (groups <= 4: [2 kKSteps][16 lanes] float2, then {m, l} [kWarps][8])
  static constexpr int kUnitBytes = kMaxUnits * 16;
  static constexpr int kSmallMergeBytes = 2 * (D / 16) * 16 * 8 + kWarps * 8 * 2 * 4;
  static constexpr int kTailBytes = kPipeBytes + kUnitBytes + kSmallMergeBytes;
  static constexpr int kSmemBytes = kTailBytes > kMergeBytes ? kTailBytes : kMergeBytes;
  static constexpr int kPiecesPerKey = kVB / 16;
  static constexpr int kPieceIters = kWK * kPiecesPerKey / 32;
  static_assert(kStageBytes % 16 == 0 && kWarpRing % 16 == 0 && kPBytes % 16 == 0);
  static_assert(kWK * kPiecesPerKey % 32 == 0 && kKB >= 8 && kVT >= 4);

  // TMA staging (KV4, D = 128, pages of a multiple of kWK tokens; the kernel's
  // kTma): one lane of a warp stages a warp-chunk with two tensor copies (the
  // K and the V values, kWK rows of 64 bytes each, in the TMA's 64-byte
  // swizzle: 16-byte piece i of row r at i ^ ((r >> 1) & 3)) and two bulk
  // copies (the K and the V {scale, zero} of its keys), all completing on the
  // stage's mbarrier. Layout: [kWarps][kStages] {K box, V box} (each box
  // 512-byte aligned, so the swizzle is a function of the row alone), then
  // [kWarps][kStages] {K params, V params}, then the warps' P buffers; the
  // pipe area has the size of the cp.async layout's, the mbarriers
  // [kWarps][kStages] follow the tail.
  static constexpr bool kTmaOk = DT == KvDtype::kInt4 && D == 128;
  static constexpr int kBoxBytes = kWK * kVB;
  static constexpr int kTmaKvStage = 2 * kBoxBytes;
  static constexpr int kTmaParBase = kWarps * kStages * kTmaKvStage;
  static constexpr int kTmaParStage = 2 * kWK * 4;
  static constexpr int kTmaPBase = kTmaParBase + kWarps * kStages * kTmaParStage;
  static constexpr int kBarOff = (kTailBytes + 7) / 8 * 8;
  static constexpr int kTmaTailBytes = kBarOff + kWarps * kStages * 8;
  static constexpr int kTmaSmemBytes = kTmaTailBytes > kMergeBytes ? kTmaTailBytes : kMergeBytes;
  static_assert(!kTmaOk || (kTmaPBase + kWarps * kPBytes == kPipeBytes && kBoxBytes % 512 == 0 && kVB == 64));
  // kBlocksPerSm fit in an sm_90 SM's 228 KB (1 KB of it reserved per block)
  static_assert(kBlocksPerSm * (kSmemBytes + 1024) <= 228 * 1024 &&
                (!kTmaOk || kBlocksPerSm * (kTmaSmemBytes + 1024) <= 228 * 1024));
};

// The TMA layout's 64-byte swizzle for the rows a thread reads (kTma):
// keys: rows 16 t + g8 (+ 8) -> (g8 >> 1) & 3; values: row
// 16 ks + kTmaValueRow[x] + (c & 1) + 4 (c >> 1) -> (x & 1) | 2 (c >> 1).
// That value row order puts the four rows of an access phase (c = 0..3) in
// distinct quarters of the 128 banks' bytes: free of bank conflicts.
__device__ __forceinline__ int tma_key_swizzle(int g8) { return (g8 >> 1) & 3; }
__device__ __forceinline__ int tma_value_row(int x, int c) { return 2 * (x & 1) + 8 * (x >> 1) + (c & 1) + 4 * (c >> 1); }
__device__ __forceinline__ int tma_value_swizzle(int x, int c) { return (x & 1) | (2 * (c >> 1)); }

// XOR of the 16-byte piece index of key row `r` in shared memory. Values: a
// thread reads kVT bytes at slice g8 of rows c + 4x (x = 0..3), so the rows of
// one access phase differ in r & 3; keys: kKB bytes at slice c of rows g8.
template <int kThreadBytes, bool kValue>
__device__ __forceinline__ int kv_swizzle(int r) {
  if constexpr (kValue) {
    if constexpr (kThreadBytes == 8) return r & 3;
    else if constexpr (kThreadBytes == 16) return 2 * (r & 3);
    else if constexpr (kThreadBytes == 32) return (r & 1) | ((r & 2) << 1);
    else return 0;
  } else {
    if constexpr (kThreadBytes == 32) return r & 1;
    else return 0;
  }
}

// The kBytes at slice `slice` of a row (pieces XOR-swizzled by `swz`) as words.
template <int kBytes>
__device__ __forceinline__ void read_slice(const uint8_t* row, int slice, int swz, uint32_t (&w)[kBytes / 4]) {
  if constexpr (kBytes >= 16) {
#pragma unroll
    for (int j = 0; j < kBytes / 16; ++j) {
      const uint4 u = *reinterpret_cast<const uint4*>(row + ((slice * kBytes + 16 * j) ^ (16 * swz)));
      w[4 * j] = u.x, w[4 * j + 1] = u.y, w[4 * j + 2] = u.z, w[4 * j + 3] = u.w;
    }
  } else if constexpr (kBytes == 8) {
    const uint2 u = *reinterpret_cast<const uint2*>(row + ((slice * 8) ^ (16 * swz)));
    w[0] = u.x, w[1] = u.y;
  } else {
    w[0] = *reinterpret_cast<const uint32_t*>(row + ((slice * 4) ^ (16 * swz)));
  }
}

// A key slice's words -> kKB * 8 / kBits / 2 half2 of biased codes (or fp16
// values), in the order of kv_pair_element.
template <KvDtype DT, int kWords>
__device__ __forceinline__ void dequant_key(const uint32_t (&w)[kWords], uint32_t* kb) {
  if constexpr (DT == KvDtype::kInt4) {
    // nibbles (0, 4) and (2, 6) -> 1024 + t; (1, 5) and (3, 7) -> 1024 + 16 t
    // (their q are pre-divided by 16): one shift per 8 codes
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      const uint32_t w8 = w[j] >> 8;
      kb[4 * j] = lop3_and_or(w[j], 0x000F000Fu, 0x64006400u);
      kb[4 * j + 1] = lop3_and_or(w[j], 0x00F000F0u, 0x64006400u);
      kb[4 * j + 2] = lop3_and_or(w8, 0x000F000Fu, 0x64006400u);
      kb[4 * j + 3] = lop3_and_or(w8, 0x00F000F0u, 0x64006400u);
    }
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

// Two keys' value slices (words wa, wb) -> half2 (a_e, b_e) per element e of
// the slice, codes exact. kSub: the code t as the fp16 subnormal t 2^-24 (KV4
// odd nibbles 16 t 2^-24), masked out of the word and nothing else; the
// product's rows are scaled back once per unit (decode_mma_kernel). Else
// 1024 + t with 1024 subtracted (hsub2; odd KV4 nibbles one hfma2).
template <KvDtype DT, int kWords, bool kSub>
__device__ __forceinline__ void dequant_value_pair(const uint32_t (&wa)[kWords], const uint32_t (&wb)[kWords],
                                                   uint32_t* vb) {
  const half2 kBias = __half2half2(__ushort_as_half(0x6400));  // 1024
  if constexpr (DT == KvDtype::kInt4) {
    // kSub: the nibbles masked out as they are; else even nibbles (1024 + t)
    // - 1024, odd ones (1024 + 16 t) / 16 - 64 in one hfma2 (exact); one
    // shift per 8 codes either way
    const half2 k16th = __half2half2(__ushort_as_half(0x2C00));  // 1/16
    const half2 kM64 = __half2half2(__ushort_as_half(0xD400));   // -64
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      const uint32_t lohi[2] = {__byte_perm(wa[j], wb[j], 0x5410), __byte_perm(wa[j], wb[j], 0x7632)};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t x = lohi[h], x8 = x >> 8;
        uint32_t* o = vb + 8 * j + 4 * h;
        if constexpr (kSub) {
          o[0] = x & 0x000F000Fu;
          o[1] = x & 0x00F000F0u;
          o[2] = x8 & 0x000F000Fu;
          o[3] = x8 & 0x00F000F0u;
        } else {
          o[0] = as_u32(__hsub2(as_half2(lop3_and_or(x, 0x000F000Fu, 0x64006400u)), kBias));
          o[1] = as_u32(__hfma2(as_half2(lop3_and_or(x, 0x00F000F0u, 0x64006400u)), k16th, kM64));
          o[2] = as_u32(__hsub2(as_half2(lop3_and_or(x8, 0x000F000Fu, 0x64006400u)), kBias));
          o[3] = as_u32(__hfma2(as_half2(lop3_and_or(x8, 0x00F000F0u, 0x64006400u)), k16th, kM64));
        }
      }
    }
  } else if constexpr (DT == KvDtype::kInt8) {
    // each byte over a zero byte (kSub: t 2^-24) or over 0x64 (1024 + t, less 1024)
    constexpr uint32_t kFill = kSub ? 0u : 0x64646464u;
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      const uint32_t t[2] = {__byte_perm(wa[j], wb[j], 0x5140), __byte_perm(wa[j], wb[j], 0x7362)};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t v = __byte_perm(t[e / 2], kFill, e % 2 ? 0x4342 : 0x4140);
        vb[4 * j + e] = kSub ? v : as_u32(__hsub2(as_half2(v), kBias));
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      vb[2 * j] = __byte_perm(wa[j], wb[j], 0x5410);
      vb[2 * j + 1] = __byte_perm(wa[j], wb[j], 0x7632);
    }
  }
}

// kv_pair_element(c, i, hi) - c D / 4 (every format): thread c's q elements
// are the contiguous run [c D / 4, (c + 1) D / 4) of the row, and those of
// pairs i = 4 w .. 4 w + 3 the 8 halves at c D / 4 + 8 w; for i < 4 this is
// an element's place among those 8 (a constant after unrolling).
template <KvDtype DT, int D>
__host__ __device__ constexpr int kv_pair_local(int i, int hi) {
  if constexpr (DT == KvDtype::kInt4) {
    return 8 * (i / 4) + i % 4 + 4 * hi;
  } else if constexpr (DT == KvDtype::kInt8) {
    return 4 * (i / 2) + 2 * (i % 2) + hi;
  } else {
    return 2 * i + hi;
  }
}

// 2^x on the special-function unit alone (exp2f adds a range fix-up of three
// instructions for results below 2^-126; flushed to 0 here, which p = 2^(s - m)
// rounded to fp16 would flush anyway). ex2(-inf) = 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// B fragments of P'^T from the P buffer ([keys][8 heads] fp16, 16 bytes a
// key): N matrices of 8 keys, lane l giving the row of key row_key (its
// matrix l / 8). The memory clobber keeps the buffer's stores before it.
template <int N>
__device__ __forceinline__ void ldmatrix_trans(uint32_t (&r)[N], const half* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (N == 4) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
  } else {
    static_assert(N == 2);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a)
                 : "memory");
  }
}

}  // namespace qserve::cuda::mmat
