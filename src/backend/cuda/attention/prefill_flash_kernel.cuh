// The prefill attention kernel (flash-attention 2 style; fp16 x fp16 -> f32
// on wgmma on sm_90a, on mma.sync m16n8k16 elsewhere) over KV4 / KV8 / FP16
// pages.
//
// A block (one warpgroup of 4 warps) serves 128 rows of one (sequence, KV
// head): row r is new token tok0 + r / group, query head r % group of the KV
// head's group, so the group's query heads share every K/V tile the block
// reads (128 / group tokens per block; rows past the last token are zero and
// not written). Warp w owns rows 16 w + [0, 16) and 64 + 16 w + [0, 16): the
// two m64 row blocks of wgmma, whose accumulators come out in the mma.sync C
// layout of each warp's 16 rows.
//
// Per 64-key tile:
//  - quantized pages: the codes and the {scale, zero} pairs are staged raw
//    (cp.async, 2-3 stages, attn::stage_kv_chunk), then the block
//    dequantizes the tile once into fp16 K and V tiles in shared memory
//    (x = (t - z) s: t exact in fp16 from 1024 + t, one hfma2 per pair) that
//    all 128 rows read; FP16 pages are copied straight into the fp16 tiles
//    (cp.async, double-buffered);
//  - per 32 keys (64 at d = 64): S = Q K^T (wgmma, A = Q and B = K from
//    shared memory; or ldmatrix + mma.sync), the causal mask only where the
//    keys reach past a warp's first row, online softmax in the log2 domain
//    (the scale applied to S in f32), P kept in registers as the A operand of
//    O += P V (wgmma with V through an N-major descriptor; or ldmatrix.trans +
//    mma.sync).
// fp16 tiles are [D / 64 column blocks][rows][128 B] with 16-byte chunks
// swizzled by chunk ^ (row % 8): the 128-byte swizzle of wgmma operands, and
// free of bank conflicts for ldmatrix and the 16-byte stores.
//
// KV4 order: a 32-bit word of 8 codes dequantizes into the pairs (e_n, e_n+4)
// (one lop3 per pair), so inside every group of 8 head dims the tiles hold
// elements in the order 0 4 1 5 2 6 3 7. Q is stored in that order too (the
// contraction order of Q K^T is free) and the output columns are put back on
// the way out.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "backend/cuda/attention/paged_attention_kernel.cuh"  // attn::Params, attn::stage_kv_chunk
#include "quant/kv_format.h"

namespace qserve::cuda::flash {

constexpr int kThreads = 128;  // attn::stage_kv_chunk stages with exactly this many threads
constexpr int kWarps = 4;
constexpr int kRows = 128;     // query rows per block
constexpr int kWarpRows = 32;  // two m16 tiles per warp
constexpr int kKeys = 64;      // keys per tile (attn::kChunk)
static_assert(kThreads == attn::kThreads && kKeys == attn::kChunk && kWarps * kWarpRows == kRows);

template <KvDtype DT, int D>
struct Cfg {
  static constexpr bool kQuant = DT != KvDtype::kFp16;
  static constexpr int kVB = D * kv_bits(DT) / 8;  // bytes of a token's codes
  static constexpr int kRowBytes = D * 2;          // fp16 row
  static constexpr int kChunks = D / 8;            // 16-byte chunks per fp16 row
  static constexpr int kQBytes = kRows * kRowBytes;
  static constexpr int kTileBytes = kKeys * kRowBytes;  // one fp16 K (or V) tile
  // quantized: raw stages as attn::stage_kv_chunk lays them out (K codes, K
  // params, V codes, V params)
  static constexpr int kHalfStage = kKeys * kVB + (kQuant ? kKeys * 4 : 0);
  static constexpr int kRawStages = DT == KvDtype::kInt4 ? 3 : 2;
  static constexpr int kRawBytes = kQuant ? kRawStages * 2 * kHalfStage : 0;
  static constexpr int kKvStages = kQuant ? 1 : 2;  // fp16 K+V tile pairs
  // + 1 KiB to align the tiles to 1 KiB (the swizzle XORs address bits 4..7)
  static constexpr int kSmem = kQBytes + kKvStages * 2 * kTileBytes + kRawBytes + 1024;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Byte offset of 16-byte chunk `ch` of row `r` in a swizzled fp16 tile
// ([D / 64 column blocks][kRowsInTile][128 B]): the 128-byte swizzle of wgmma
// operands (8-row atoms of 1 KiB, chunk ^ (row % 8)), K-major for Q and K,
// N-major for V; ldmatrix reads it without bank conflicts too.
template <int kRowsInTile>
__device__ __forceinline__ int swz128(int r, int ch) {
  return (ch >> 3) * (kRowsInTile * 128) + r * 128 + (((ch & 7) ^ (r & 7)) << 4);
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& a, uint32_t& b, uint32_t& c, uint32_t& d) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& a, uint32_t& b, uint32_t& c, uint32_t& d) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr));
}
// v, opaque to the compiler: addresses derived from it are recomputed in the
// loop (one lop3 each) instead of being hoisted into registers
__device__ __forceinline__ uint32_t opaque(uint32_t v) {
  asm volatile("mov.b32 %0, %0;\n" : "+r"(v));
  return v;
}
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 8 consecutive elements (4 words) <-> the KV4 tile order 0 4 1 5 2 6 3 7
__device__ __forceinline__ uint4 to_kv4_order(uint4 u) {
  return {__byte_perm(u.x, u.z, 0x5410), __byte_perm(u.x, u.z, 0x7632), __byte_perm(u.y, u.w, 0x5410),
          __byte_perm(u.y, u.w, 0x7632)};
}
__device__ __forceinline__ uint4 from_kv4_order(uint4 w) {
  return {__byte_perm(w.x, w.y, 0x5410), __byte_perm(w.z, w.w, 0x5410), __byte_perm(w.x, w.y, 0x7632),
          __byte_perm(w.z, w.w, 0x7632)};
}

// Raw codes of one staged 64-key tile (K at raw, V at raw + kHalfStage) ->
// fp16 tiles sk, sv: x = (t - z) s, t exact (1024 + t - 1024), one hfma2 per
// pair with -z s rounded to fp16 once.
template <KvDtype DT, int D>
__device__ __forceinline__ void dequant_tile(const uint8_t* raw, uint8_t* sk, uint8_t* sv, int tid) {
  using C = Cfg<DT, D>;
  const half2 kBias = __half2half2(__ushort_as_half(0x6400));  // 1024
#pragma unroll
  for (int kv = 0; kv < 2; ++kv) {
    const uint8_t* src = raw + kv * C::kHalfStage;
    uint8_t* dst = kv ? sv : sk;
#pragma unroll 2  // (fully unrolled, the loads in flight spill the O accumulators)
    for (int it = 0; it < kKeys * C::kChunks / kThreads; ++it) {
      const int i = tid + it * kThreads;
      const int key = i / C::kChunks, ch = i % C::kChunks;
      const half2 sz = *reinterpret_cast<const half2*>(src + kKeys * C::kVB + key * 4);
      const half2 s2 = __low2half2(sz);
      const half2 nzs2 = __half2half2(__float2half_rn(-__low2float(sz) * __high2float(sz)));
      uint32_t out[4];
      if constexpr (DT == KvDtype::kInt4) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(src + key * C::kVB + ch * 4);
#pragma unroll
        for (int n = 0; n < 4; ++n)
          out[n] = as_u32(__hfma2(__hsub2(as_half2(lop3_and_or(w >> (4 * n), 0x000F000Fu, 0x64006400u)), kBias), s2, nzs2));
      } else {
        const uint2 w = *reinterpret_cast<const uint2*>(src + key * C::kVB + ch * 8);
        const uint32_t pairs[4] = {__byte_perm(w.x, 0x64646464u, 0x4140), __byte_perm(w.x, 0x64646464u, 0x4342),
                                   __byte_perm(w.y, 0x64646464u, 0x4140), __byte_perm(w.y, 0x64646464u, 0x4342)};
#pragma unroll
        for (int n = 0; n < 4; ++n) out[n] = as_u32(__hfma2(__hsub2(as_half2(pairs[n]), kBias), s2, nzs2));
      }
      *reinterpret_cast<uint4*>(dst + swz128<kKeys>(key, ch)) = make_uint4(out[0], out[1], out[2], out[3]);
    }
  }
}

// FP16 pages: positions [c0, c0 + 64) of one KV head straight into the
// swizzled fp16 tiles; positions >= end zero-filled.
template <int D>
__device__ __forceinline__ void stage_fp16_tile(uint8_t* sk, uint8_t* sv, const attn::Params& p, const int32_t* pages,
                                                int64_t head_off, int c0, int end, int tid) {
  constexpr int kChunks = D / 8;
#pragma unroll 2
  for (int it = 0; it < kKeys * kChunks / kThreads; ++it) {
    const int i = tid + it * kThreads;
    const int key = i / kChunks, ch = i % kChunks;
    const int pos = c0 + key;
    const bool valid = pos < end;
    int64_t off = 0;
    if (valid) off = pages[pos / p.page_size] * p.page_bytes + head_off + static_cast<int64_t>(pos % p.page_size) * (D * 2) + ch * 16;
    cp_async_16(sk + swz128<kKeys>(key, ch), p.k_pages + off, valid ? 16 : 0);
    cp_async_16(sv + swz128<kKeys>(key, ch), p.v_pages + off, valid ? 16 : 0);
  }
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- sm_90a: wgmma for S = Q K^T -------------------------------------------------
// Shared-memory descriptor of a K-major operand in the 128-byte swizzle (rows
// of 128 B, 8-row atoms of 1 KiB, atoms 1 KiB-aligned): start address >> 4,
// leading byte offset unused (1), stride byte offset 1024 >> 4 between 8-row
// groups, layout type 1 (128B swizzle). +32 bytes steps K by 16 fp16.
__device__ __forceinline__ uint64_t desc_sw128(const void* p) {
  const uint64_t addr = smem_u32(p);
  return ((addr & 0x3ffff) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// fp16 stores / cp.async writes to shared memory -> visible to wgmma (async proxy)
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
template <int NT>
__device__ __forceinline__ void acc_fence(float (&d)[2][NT][4]) {
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int k = 0; k < 4; ++k) asm volatile("" : "+f"(d[mt][t][k])::"memory");
}
// d[t][k] (+)= A (64 x 16, desc a) * B (16 x N, desc b): n8 tile t, k as in mma.sync's C
template <int N>
__device__ __forceinline__ void wgmma_f16(float (&d)[N / 8][4], uint64_t a, uint64_t b, bool accumulate);
template <>
__device__ __forceinline__ void wgmma_f16<32>(float (&d)[4][4], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}
template <>
__device__ __forceinline__ void wgmma_f16<64>(float (&d)[8][4], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}
// Descriptor of an N-major operand (B = V: [D / 64 column blocks][keys][128 B],
// 128-byte swizzle): leading byte offset = the stride between 64-column
// blocks, stride byte offset = 1024 between 8-key groups.
__device__ __forceinline__ uint64_t desc_sw128_mn(const void* p, uint32_t column_block_bytes) {
  const uint64_t addr = smem_u32(p);
  return ((addr & 0x3ffff) >> 4) | (uint64_t{(column_block_bytes >> 4) & 0x3fff} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
// d[t][k] += A (64 x 16, registers: the mma.sync m16k16 A fragment of each
// warp's 16 rows) * B (16 x N, N-major descriptor b)
template <int N>
__device__ __forceinline__ void wgmma_f16_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b);
template <>
__device__ __forceinline__ void wgmma_f16_rs<64>(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_f16_rs<128>(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]),
        "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
        "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
        "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
        "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
#else
__device__ __forceinline__ void fence_proxy_async() {}
#endif

// grid: (KV head, sequence, token block counted from the last: the blocks
// with the most keys start first). p.q_starts / context_lens as in
// prefill_attention.h; p.group any of 1..8. kPvWgmma: O += P V on wgmma too
// (sm_90a; otherwise mma.sync).
template <KvDtype DT, int D, bool kPvWgmma>
__global__ void __launch_bounds__(kThreads, 2) prefill_flash_kernel(const attn::Params p, int num_token_blocks) {
  using C = Cfg<DT, D>;
  // keys per S pass: S in 2 x kSub / 2 registers (64 keys at d = 128 spilled)
  constexpr int kSub = D == 128 ? 32 : 64;
  constexpr int kNT = kSub / 8;   // n8 tiles of S per m16 tile
  constexpr int kDT = D / 8;      // n8 tiles of O per m16 tile
  extern __shared__ __align__(128) uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* sq = smem;                 // [128][D] fp16, swizzled
  uint8_t* skv = smem + C::kQBytes;   // kKvStages x {K tile, V tile}
  uint8_t* sraw = skv + C::kKvStages * 2 * C::kTileBytes;

  const int kvh = blockIdx.x, b = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g8 = lane / 4, c = lane % 4;
  const int group = p.group;
  const int hq = p.num_kv_heads * group;
  const int tokens_per_block = kRows / group;
  const int q_row0 = p.q_starts[b];
  const int num_new = p.q_starts[b + 1] - q_row0;
  const int tok0 = (num_token_blocks - 1 - static_cast<int>(blockIdx.z)) * tokens_per_block;
  if (tok0 >= num_new) return;
  const int ntok = min(tokens_per_block, num_new - tok0);
  const int pos0 = p.context_lens[b] - num_new + tok0;  // position of the block's first token
  const int end = pos0 + ntok;                          // the block sees keys < end

  // ---- Q -> shared memory (rows past the last token: zeros) ------------------
  for (int i = tid; i < kRows * C::kChunks; i += kThreads) {
    const int r = i / C::kChunks, ch = i % C::kChunks;
    const int tok = r / group;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (tok < ntok) {
      const int64_t row = static_cast<int64_t>(q_row0 + tok0 + tok) * hq + kvh * group + r % group;
      v = *reinterpret_cast<const uint4*>(p.q + row * D + ch * 8);
      if constexpr (DT == KvDtype::kInt4) v = to_kv4_order(v);
    }
    *reinterpret_cast<uint4*>(sq + swz128<kRows>(r, ch)) = v;
  }
  fence_proxy_async();  // Q is read by wgmma after the loop's first barrier

  // rows of warp w: 16 w + [0, 16) (m tile 0) and 64 + 16 w + [0, 16) (m tile 1),
  // the wgmma row blocks; a thread's rows: 64 mt + 16 warp + 8 h + g8
  const int warp_first = pos0 + min(16 * warp / group, ntok - 1);  // position of the warp's first row
  const int block_last = end - 1;                                  // of the block's last row

  // ---- the copy pipeline -------------------------------------------------------
  const int num_tiles = (end + kKeys - 1) / kKeys;
  const int32_t* pages = p.page_table + static_cast<int64_t>(b) * p.page_table_stride;
  const int64_t head_off = static_cast<int64_t>(kvh) * p.head_block_bytes;
  auto issue = [&](int tile) {
    if constexpr (C::kQuant) {
      attn::stage_kv_chunk<C::kVB, true, C::kHalfStage>(sraw + (tile % C::kRawStages) * 2 * C::kHalfStage, p, pages,
                                                         head_off, tile * kKeys, end, tid);
    } else {
      uint8_t* st = skv + (tile % 2) * 2 * C::kTileBytes;
      stage_fp16_tile<D>(st, st + C::kTileBytes, p, pages, head_off, tile * kKeys, end, tid);
    }
  };
  constexpr int kAhead = C::kQuant ? C::kRawStages - 1 : 1;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < num_tiles) issue(s);
    cp_async_commit();
  }

  float o[2][kDT][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int e = 0; e < kDT; ++e) o[mt][e][0] = o[mt][e][1] = o[mt][e][2] = o[mt][e][3] = 0.f;
  float m[2][2], l[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;
  const float sl2 = p.scale_log2;

  // ldmatrix lane addresses. Every row offset is a multiple of 8 rows, so a
  // lane's row % 8 is lane % 8, and chunk (2 k + b) of its row sits at
  // (row base + 16 ((lane % 8) ^ b)) ^ (32 (k % 4)) + column block k / 4
  // (tiles aligned to 1 KiB).
  //   Q: row 64 mt + 16 warp + (lane % 8) + 8 ((lane / 8) % 2), chunk 2 kk + lane / 16
  //   K: key 16 pair + (lane % 8) + 8 (lane / 16),                chunk 2 kk + (lane / 8) % 2
  //   V: key 16 ks + (lane % 8) + 8 ((lane / 8) % 2),             chunk 2 dp + lane / 16 (V rows: 2D bytes)
  const uint32_t q_addr = smem_u32(sq) + (16 * warp + (lane % 8) + 8 * ((lane / 8) % 2)) * 128 +
                          16 * ((lane % 8) ^ (lane / 16));
  const uint32_t k_lane = ((lane % 8) + 8 * (lane / 16)) * 128 + 16 * ((lane % 8) ^ ((lane / 8) % 2));
  const uint32_t v_lane = ((lane % 8) + 8 * ((lane / 8) % 2)) * 128 + 16 * ((lane % 8) ^ (lane / 16));
  (void)q_addr;
  (void)k_lane;

  for (int j = 0; j < num_tiles; ++j) {
    uint8_t* sk;
    if constexpr (C::kQuant) {
      cp_async_wait<C::kRawStages - 2>();
      __syncthreads();  // tile j staged; every warp done with the previous fp16 tiles
      sk = skv;
      dequant_tile<DT, D>(sraw + (j % C::kRawStages) * 2 * C::kHalfStage, sk, sk + C::kTileBytes, tid);
      if (j + kAhead < num_tiles) issue(j + kAhead);
      cp_async_commit();
      fence_proxy_async();
      __syncthreads();
    } else {
      cp_async_wait<0>();
      fence_proxy_async();
      __syncthreads();  // tile j landed; every warp done with tile j - 1's buffers
      if (j + 1 < num_tiles) issue(j + 1);
      cp_async_commit();
      sk = skv + (j % 2) * 2 * C::kTileBytes;
    }
    const uint32_t v_addr = opaque(smem_u32(sk) + C::kTileBytes + v_lane);
#pragma unroll
    for (int sub = 0; sub < kKeys / kSub; ++sub) {
      const int k0 = j * kKeys + sub * kSub;
      if (k0 > block_last) break;  // causal: nothing from here on is visible to the block

      // 1. S = Q K^T, [2 m tiles][kSub / 8 key tiles]
      float s[2][kNT][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int t = 0; t < kNT; ++t) s[mt][t][0] = s[mt][t][1] = s[mt][t][2] = s[mt][t][3] = 0.f;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      // wgmma m64 n kSub k16: A = Q (shared, rows 64 mt..), B = K (shared); the
      // accumulators come out in the mma.sync C layout of the warp's 16 rows
      wgmma_fence();
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const uint64_t da = desc_sw128(sq + (kk / 4) * (kRows * 128) + mt * 64 * 128 + (kk % 4) * 32);
          const uint64_t db = desc_sw128(sk + (kk / 4) * (kKeys * 128) + sub * kSub * 128 + (kk % 4) * 32);
          wgmma_f16<kSub>(s[mt], da, db, kk > 0);
        }
      wgmma_commit();
      wgmma_wait0();
      acc_fence(s);
#else
      {
        const uint32_t k_addr = opaque(smem_u32(sk) + k_lane), qa_addr = opaque(q_addr);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t qa[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
            ldsm_x4((qa_addr ^ (32 * (kk % 4))) + (kk / 4) * (kRows * 128) + 64 * mt * 128, qa[mt][0], qa[mt][1],
                    qa[mt][2], qa[mt][3]);
#pragma unroll
          for (int pr = 0; pr < kNT / 2; ++pr) {
            uint32_t b0, b1, b2, b3;
            ldsm_x4((k_addr ^ (32 * (kk % 4))) + (kk / 4) * (kKeys * 128) + (sub * kSub + 16 * pr) * 128, b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              mma(s[mt][2 * pr], qa[mt], b0, b1);
              mma(s[mt][2 * pr + 1], qa[mt], b2, b3);
            }
          }
        }
      }
#endif
      // 2. causal mask (only where the keys reach past the warp's first row;
      //    keys >= end are past every row)
      if (k0 + kSub - 1 > warp_first) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int rpos = pos0 + min((64 * mt + 16 * warp + 8 * h + g8) / group, ntok - 1);
#pragma unroll
            for (int t = 0; t < kNT; ++t)
#pragma unroll
              for (int k = 0; k < 2; ++k)
                if (k0 + 8 * t + 2 * c + k > rpos) s[mt][t][2 * h + k] = -INFINITY;
          }
      }
      // 3. online softmax (4 threads share a row; every row sees key 0 in the
      //    first pass, so m is finite from then on)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float mx = m[mt][h];
#pragma unroll
          for (int t = 0; t < kNT; ++t) mx = fmaxf(mx, fmaxf(s[mt][t][2 * h], s[mt][t][2 * h + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float alpha = ex2((m[mt][h] - mx) * sl2);
          m[mt][h] = mx;
          const float mb = mx * sl2;
          float sum = 0.f;
#pragma unroll
          for (int t = 0; t < kNT; ++t)
#pragma unroll
            for (int k = 0; k < 2; ++k) {
              const float e = ex2(fmaf(s[mt][t][2 * h + k], sl2, -mb));
              s[mt][t][2 * h + k] = e;
              sum += e;
            }
          l[mt][h] = l[mt][h] * alpha + sum;
#pragma unroll
          for (int e = 0; e < kDT; ++e) o[mt][e][2 * h] *= alpha, o[mt][e][2 * h + 1] *= alpha;
        }
      // 4. O += P V, 16 keys per k step, P from the S accumulators
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      if constexpr (kPvWgmma) {
        // wgmma m64 n D k16, A = P (registers, the mma.sync A layout of the
        // warp's 16 rows), B = V (shared, N-major); waited for at once (P's
        // registers and O are reused right after)
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < kSub / 16; ++ks)
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            const uint32_t pa[4] = {
                as_u32(__floats2half2_rn(s[mt][2 * ks][0], s[mt][2 * ks][1])),
                as_u32(__floats2half2_rn(s[mt][2 * ks][2], s[mt][2 * ks][3])),
                as_u32(__floats2half2_rn(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1])),
                as_u32(__floats2half2_rn(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]))};
            wgmma_f16_rs<D>(o[mt], pa, desc_sw128_mn(sk + C::kTileBytes + (sub * kSub + 16 * ks) * 128, kKeys * 128));
          }
        wgmma_commit();
        wgmma_wait0();
        acc_fence(o);
      } else
#endif
      {
#pragma unroll
      for (int ks = 0; ks < kSub / 16; ++ks) {
        uint32_t pa[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          pa[mt][0] = as_u32(__floats2half2_rn(s[mt][2 * ks][0], s[mt][2 * ks][1]));
          pa[mt][1] = as_u32(__floats2half2_rn(s[mt][2 * ks][2], s[mt][2 * ks][3]));
          pa[mt][2] = as_u32(__floats2half2_rn(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]));
          pa[mt][3] = as_u32(__floats2half2_rn(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]));
        }
#pragma unroll
        for (int dp = 0; dp < kDT / 2; ++dp) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4_t((v_addr ^ (32 * (dp % 4))) + (dp / 4) * (kKeys * 128) + (sub * kSub + 16 * ks) * 128, b0, b1, b2, b3);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma(o[mt][2 * dp], pa[mt], b0, b1);
            mma(o[mt][2 * dp + 1], pa[mt], b2, b3);
          }
        }
      }
      }
    }
  }
  cp_async_wait<0>();

  // ---- normalize, stage the warp's rows in its own Q rows, store 16 bytes a lane
  __syncthreads();  // every warp's last reads of Q (wgmma reads all rows) are done
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mt][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.f / sum;
      const int r = 64 * mt + 16 * warp + 8 * h + g8;
#pragma unroll
      for (int e = 0; e < kDT; ++e)
        *reinterpret_cast<half2*>(sq + swz128<kRows>(r, e) + 4 * c) =
            __floats2half2_rn(o[mt][e][2 * h] * inv, o[mt][e][2 * h + 1] * inv);
    }
  __syncwarp();
#pragma unroll
  for (int it = 0; it < kWarpRows * C::kChunks / 32; ++it) {
    const int i = lane + 32 * it;
    const int lr = i / C::kChunks, ch = i % C::kChunks;  // the warp's row lr: m tile lr / 16
    const int r = 64 * (lr / 16) + 16 * warp + lr % 16;
    const int tok = r / group;
    if (tok >= ntok) continue;
    uint4 v = *reinterpret_cast<const uint4*>(sq + swz128<kRows>(r, ch));
    if constexpr (DT == KvDtype::kInt4) v = from_kv4_order(v);
    const int64_t row = static_cast<int64_t>(q_row0 + tok0 + tok) * hq + kvh * group + r % group;
    *reinterpret_cast<uint4*>(p.out + row * D + ch * 8) = v;
  }
}

}  // namespace qserve::cuda::flash
