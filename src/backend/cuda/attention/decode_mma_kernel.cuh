// The tensor-core decode kernel with the keys in the M dimension of the
// tiles (mma.sync m16n8k16, fp16 x fp16 -> f32), for every GQA group 1..8:
//   scores  S^T = K Q^T : m16 = 16 keys, n8 = the group's query heads, k = head dims
//   values  O^T = V^T P^T: m16 = 16 head dims, n8 = the heads, k = 16 keys
// so no row of a tile is wasted and each KV byte is dequantized once for all
// the heads of its group (columns of the n8 tiles past the group are zero).
//
// A block of 4 warps serves one (KV head, sequence, split) unit, or, in the
// persistent grid (DecodePlan::persistent), several in turn, or 2 or 4 units
// side by side on 2 warps or 1 each (DecodePlan::unit_warps: fewer waves of
// blocks where the units are many and short). Each warp streams
// its own warp-chunks of kWK keys (warp w takes chunks w, w + 4, ... of each
// unit) through a private cp.async ring of kStages stages (K values, V
// values, then per key the K and the V {scale, zero} side by side), so the
// main loop has no block barrier;
// the ring runs on across a block's units (the next unit's first chunks load
// while the current one finishes). The warps keep separate online-softmax
// states and merge at the end of each unit (shared memory), like the splits
// of flash-decoding. Under programmatic launch the first stages may be issued
// before the wait (decode_attention.h says what may be read then).
//
// Per warp-chunk:
//  1. K rows g8, g8 + 8 of each 16-key tile, a thread's kVB/4 bytes (column
//     slice c), dequantized into A fragments (1024 + code in fp16: one lop3
//     per two codes); the head dimension is permuted as in the prefill
//     kernel (kv_pair_element), Q's B fragments follow the same order; the
//     accumulators start at -(1024 sum q_operand + z sum q), so that the
//     tensor cores leave q . (t - z) and one multiply by the key's scale
//     remains (one 8-byte read brings the key's K and V {scale, zero});
//  2. masks, the online softmax per head (column): when a thread's own max
//     exceeds the running max (one vote), the max over the 8 key rows of a
//     column by 3 shuffles and the accumulators rescaled;
//  3. P' = p s_v (fp16, a thread's two heads of a key packed in one half2)
//     goes through a per-warp buffer [kWK keys][8 heads] and comes back as the
//     B fragments by one ldmatrix.trans (thread = 2 keys x 1 head per
//     fragment); the zero point leaves as corr = sum P' z;
//  4. V: a thread's A fragment holds 4 keys (c, c + 4, c + 8, c + 12 of the
//     16) x 16 consecutive head dims (slice g8): byte permutes pair two keys,
//     then the nibbles are masked out as fp16 subnormals t 2^-24 (KV4 odd
//     nibbles 16 t 2^-24; exact, no subtraction; the output rows are scaled
//     back once per unit), or, with DecodePlan::subnormal_values false, into
//     1024 + t with 1024 subtracted (hsub2); codes exact in fp16 either way.
// Shared-memory rows are XOR-swizzled by 16-byte pieces so that these reads
// are free of bank conflicts (kv_swizzle in decode_mma_fragments.cuh).
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "backend/cuda/launch_pdl.cuh"
#include "backend/cuda/attention/decode_mma_fragments.cuh"  // MmaTraits, swizzle, fragment helpers
#include "backend/cuda/attention/paged_attention_kernel.cuh"  // attn::Params, mma_16816, kv_pair_element
#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"     // mbarriers, TMA (kTma)

namespace qserve::cuda::mmat {

// kSubV (KV4 / KV8 only): value codes enter the tensor cores as fp16
// subnormals (dequant_value_pair); DecodePlan::subnormal_values.
// kTma (KV4, D = 128, sm_90a, page_size a multiple of kWK; DecodePlan::tma):
// a warp-chunk is staged by one lane with TMA (k_map / v_map: the K and V
// pools as rows of 64 bytes, box kWK rows, 64-byte swizzle) and two bulk
// copies of its {scale, zero}, on one mbarrier per stage, instead of ten
// cp.async per lane (MmaTraits: the layout); the maps are unused otherwise.
// kUW (DecodePlan::unit_warps): warps per unit. 4: the block's 4 warps serve
// one unit at a time (several in turn in the persistent grid); 2 or 1: the
// block serves 4 / kUW units side by side (units kSide x + side, side = warp /
// kUW), each on its own warps, ring space and named barrier, so that a grid of
// more units than resident blocks x 4 / kUW runs in fewer waves (cp.async
// staging only, one unit per side).
template <KvDtype DT, int D, bool kSubV, bool kTma, int kUW = kWarps>
__global__ void __launch_bounds__(kThreads, MmaTraits<DT, D>::kBlocksPerSm)
    decode_mma_kernel(const attn::Params p, const __grid_constant__ CUtensorMap k_map,
                      const __grid_constant__ CUtensorMap v_map) {
  using T = MmaTraits<DT, D>;
  static_assert(!kSubV || T::kParams);
  static_assert(!kTma || T::kTmaOk);
  static_assert(kUW == kWarps || ((kUW == 2 || kUW == 1) && !kTma));
  constexpr bool kSides = kUW < kWarps;  // units side by side
  constexpr int kSide = kWarps / kUW;    // units per block at once
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kTma) __trap();  // (the host launches kTma on sm_90a builds and devices only)
#endif
  constexpr int kKSteps = D / 16;  // k-steps of S^T, m-tiles of O^T
  extern __shared__ __align__(1024) uint8_t smem[];

  // (bit operations: the compiler rematerializes these in the loop, and a
  // signed % costs four instructions there)
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, c = lane & 3;
  // this warp's rank among its unit's warps, its side, its thread index there
  const int uw = kSides ? warp % kUW : warp, side = kSides ? warp / kUW : 0;
  const int utid = kSides ? tid % (kUW * 32) : tid;
  const int group = p.group;
  const int hq = p.num_kv_heads * group;
  // This block's units u = blockIdx.x + k gridDim.x, k < nu <= kMaxUnits
  // (decode_attention.cu sizes the grid so), u = KV head + heads (sequence +
  // batch split); nu > 1 only for groups <= 4 (the merge of all but the last).
  // kSides: unit kSide x + side (none for the last block's sides past the end).
  const int num_units = p.num_kv_heads * p.batch * p.num_splits;
  const int unit0 = kSides ? static_cast<int>(blockIdx.x) * kSide + side : static_cast<int>(blockIdx.x);
  const int nu = kSides ? (unit0 < num_units ? 1 : 0)
                        : (num_units - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) /
                              static_cast<int>(gridDim.x);
  if (kSides && nu == 0) return;  // (named barriers: the other sides do not wait for it)
  // [kMaxUnits] {sequence, KV head, split, context}; kSides: entry `side`
  int4* s_unit = reinterpret_cast<int4*>(smem + T::kPipeBytes) + side;
  float2* s_acc = reinterpret_cast<float2*>(smem + T::kPipeBytes + T::kUnitBytes);  // [2 kKSteps][16 lanes]
  float* s_wml = reinterpret_cast<float*>(s_acc + 2 * kKSteps * 16);                 // [kWarps][8 heads] {m, l}
  // logical page of a position: a shift for power-of-two page sizes (a run-time
  // integer division costs ~30 instructions per warp-chunk otherwise)
  auto page_of = [&](int pos) { return p.page_shift >= 0 ? pos >> p.page_shift : pos / p.page_size; };
  // Before the programmatic-launch wait (launch_pdl.cuh) this kernel reads
  // only what the previous kernel of the stream does not write (the contract
  // of decode_attention.h): the context lengths, the page table and the keys
  // and values of positions below ctx - 1. The queries, the new token's K/V
  // (position ctx - 1) and every store wait. The context lengths of the
  // table and the page-table entry of this lane's first key in unit 0 (index
  // clamped into the row: used only below the context length, where it is in
  // range) load in parallel.
  if (utid < nu) {
    const int u = unit0 + utid * gridDim.x, r = u / p.num_kv_heads;
    s_unit[utid] = make_int4(r % p.batch, u % p.num_kv_heads, r / p.batch, p.context_lens[r % p.batch]);
  }
  // the barrier of this unit's warps: the block's, a named one per side, or the warp's
  auto unit_sync = [&] {
    if constexpr (!kSides) {
      __syncthreads();
    } else if constexpr (kUW == 1) {
      __syncwarp();
    } else {
      asm volatile("bar.sync %0, %1;" ::"r"(1 + side), "n"(kUW * 32) : "memory");
    }
  };
  // kTma: this warp's stage mbarriers (one arrival: the issuing lane's, with
  // the stage's bytes), initialized before the unit table's barrier.
  // (recomputed where used: no register held through the loop)
  auto stage_bar = [&](int st) { return reinterpret_cast<uint64_t*>(smem + T::kBarOff) + warp * T::kStages + st; };
  if constexpr (kTma) {
    if (lane < T::kStages) ptx::mbar_init(stage_bar(lane), 1);
    ptx::fence_mbar_init();
    // the maps' descriptors into the TMA unit's cache before the first copy
    // (a block sees few warp-chunks per warp at short contexts)
    if (tid == 0) ptx::tma_prefetch_map(&k_map);
    if (tid == 32) ptx::tma_prefetch_map(&v_map);
  }
  // A warp-chunk inside one page (page_size a multiple of kWK; chunks start at
  // multiples of kWK): its values are one contiguous run, no per-key offsets,
  // and its page-table entry is one (the same address in every lane).
  const bool contiguous = kTma || p.page_size % T::kWK == 0;
  int first_page, first_pos;
  {
    const int r = unit0 / p.num_kv_heads;
    // unit 0, local chunk 0: its first key (contiguous), else this lane's key
    first_pos = (r / p.batch) * p.split_tokens + uw * T::kWK + (contiguous ? 0 : lane);
    first_page = p.page_table[static_cast<int64_t>(r % p.batch) * p.page_table_stride +
                              max(0, min(page_of(first_pos), p.page_table_stride - 1))];
  }
  unit_sync();  // the unit table
  // unit k of the table: sequence, KV head, split, its keys [begin, end), this warp's warp-chunks
  auto load_unit = [&](int k, int& ub, int& ukvh, int& usplit, int& ubegin, int& uend, int& un_mine) {
    const int4 e = s_unit[k];
    ub = e.x, ukvh = e.y, usplit = e.z;
    ubegin = e.z * p.split_tokens;
    uend = min(e.w, ubegin + p.split_tokens);
    const int nw = uend > ubegin ? (uend - ubegin + T::kWK - 1) / T::kWK : 0;
    un_mine = nw > uw ? (nw - uw + kUW - 1) / kUW : 0;
  };

  // ---- this warp's ring and P buffer -----------------------------------------
  uint8_t* ring = smem + warp * (T::kWarpRing + T::kPBytes);
  half* s_p = reinterpret_cast<half*>(kTma ? smem + T::kTmaPBase + warp * T::kPBytes
                                           : ring + T::kWarpRing);  // [kWK keys][8 heads]
  // stage s: its K values (the V values kVOff = kBoxBytes after), its
  // {scale, zero} (cp.async: K and V side by side per key; kTma: the K ones,
  // then the V ones)
  auto kv_stage = [&](int st) -> uint8_t* {
    return kTma ? smem + (warp * T::kStages + st) * T::kTmaKvStage : ring + st * T::kStageBytes;
  };
  auto par_stage = [&](int st) -> uint8_t* {
    return kTma ? smem + T::kTmaParBase + (warp * T::kStages + st) * T::kTmaParStage
                : ring + st * T::kStageBytes + T::kParOff;
  };

  // The staging cursor walks this warp's warp-chunks of unit 0, then of unit
  // 1, ... (local chunk iit of unit iu; iu == nu: done), kStages - 1 chunks
  // ahead of the compute, across unit boundaries: the next unit's first keys
  // load while this one finishes and merges.
  int iu = 0, iit = 0, ib, ikvh, isplit, ibegin, iend, in_mine;
  load_unit(0, ib, ikvh, isplit, ibegin, iend, in_mine);
  auto settle = [&] {
    while (iu < nu && iit >= in_mine) {
      if (++iu < nu) load_unit(iu, ib, ikvh, isplit, ibegin, iend, in_mine);
      iit = 0;
    }
  };
  settle();
  // Page entry and slot of the chunk's first key (contiguous chunks: the same
  // in every lane), else of this lane's key (page -1: past the end), at the
  // cursor, looked up one issue ahead so that the page-table load is hidden.
  struct KeyLoc {
    int page, slot;
  };
  auto locate = [&]() -> KeyLoc {
    const int c0 = ibegin + (uw + iit * kUW) * T::kWK;
    if (contiguous) {
      if (iu >= nu) return {-1, 0};
      const int idx = page_of(c0);
      return {p.page_table[static_cast<int64_t>(ib) * p.page_table_stride + idx], c0 - idx * p.page_size};
    }
    const int pos = c0 + lane;
    if (iu >= nu || lane >= T::kWK || pos >= iend) return {-1, 0};
    const int idx = page_of(pos);
    return {p.page_table[static_cast<int64_t>(ib) * p.page_table_stride + idx], pos - idx * p.page_size};
  };
  KeyLoc next{-1, 0};
  if (iu == 0) {  // from the entry loaded with the table
    if ((contiguous || lane < T::kWK) && first_pos < iend)
      next = {first_page, first_pos - page_of(first_pos) * p.page_size};
  } else {
    next = locate();
  }
  // Stages the chunk at the cursor (keys at `loc`) into `st`.
  // piece i * 32 + lane of a warp-chunk: key i * (32 / kPiecesPerKey) + lane / kPiecesPerKey
  constexpr int kKeysPerIter = 32 / T::kPiecesPerKey;
  const int lane_key = lane / T::kPiecesPerKey, lane_piece = lane % T::kPiecesPerKey;
  // When the swizzles repeat within kKeysPerIter keys, a lane's K and V
  // destinations in a stage are lane constants + i * kKeysPerIter * kVB.
  constexpr bool kLaneOffsets = kKeysPerIter % 4 == 0;
  const uint32_t k_lane_off = lane_key * T::kVB + 16 * (lane_piece ^ kv_swizzle<T::kKB, false>(lane_key));
  const uint32_t v_lane_off = T::kVOff + lane_key * T::kVB + 16 * (lane_piece ^ kv_swizzle<T::kVT, true>(lane_key));
  // the K and V {scale, zero} of this lane's key (base < 0: none, zeros)
  auto issue_params = [&](uint8_t* st, int64_t base, int slot) {
    if constexpr (T::kParams) {
      if (lane < T::kWK) {
        const int64_t src = base < 0 ? 0 : base + p.values_region_bytes + slot * 4;
        cp_async_4(st + T::kParOff + lane * 8, p.k_pages + src, base < 0 ? 0 : 4);
        cp_async_4(st + T::kParOff + lane * 8 + 4, p.v_pages + src, base < 0 ? 0 : 4);
      }
    }
  };
  auto issue = [&](int stage, KeyLoc loc) {
    uint8_t* st = kv_stage(stage);
    const int64_t head_off = static_cast<int64_t>(ikvh) * p.head_block_bytes;
    if constexpr (kTma) {
      // the chunk's kWK keys lie in one page (valid or not: the kernel masks
      // the keys past the end, their values and parameters included); the
      // maps' rows are the pools' 64-byte rows
      if (lane == 0) {
        const int64_t vals = static_cast<int64_t>(loc.page) * p.page_bytes + head_off;
        const int row = static_cast<int>((vals >> 6) + loc.slot);
        const int64_t poff = vals + p.values_region_bytes + loc.slot * 4;
        uint64_t* bar = stage_bar(stage);
        uint8_t* ps = par_stage(stage);
        ptx::mbar_arrive_expect_tx(bar, T::kTmaKvStage + T::kTmaParStage);
        ptx::tma_load_2d(st, &k_map, 0, row, bar);
        ptx::tma_load_2d(st + T::kBoxBytes, &v_map, 0, row, bar);
        ptx::tma_load_1d(ps, p.k_pages + poff, T::kWK * 4, bar);
        ptx::tma_load_1d(ps + T::kWK * 4, p.v_pages + poff, T::kWK * 4, bar);
      }
      return;
    }
    if (contiguous) {
      // loc: the chunk's page and first slot; every key of the chunk lies in
      // that page (valid or not): addresses in bounds
      const int n_valid = iend - (ibegin + (uw + iit * kUW) * T::kWK);  // >= 1
      const int64_t pg = static_cast<int64_t>(loc.page) * p.page_bytes + head_off;
      const uint8_t* kpg = p.k_pages + pg;
      const uint8_t* vpg = p.v_pages + pg;
      const uint32_t voff = static_cast<uint32_t>(loc.slot * T::kVB + lane * 16);
      // the K and V {scale, zero} of key lane (zeros past the end)
      auto chunk_params = [&](bool valid) {
        if constexpr (T::kParams) {
          if (lane < T::kWK) {
            const uint32_t poff = static_cast<uint32_t>(p.values_region_bytes + (loc.slot + lane) * 4);
            cp_async_4(st + T::kParOff + lane * 8, kpg + poff, valid ? 4 : 0);
            cp_async_4(st + T::kParOff + lane * 8 + 4, vpg + poff, valid ? 4 : 0);
          }
        }
      };
      if constexpr (kLaneOffsets) {
        if (n_valid >= T::kWK) {  // a full chunk (all but a unit's last): no source sizes
          const uint32_t sb = static_cast<uint32_t>(__cvta_generic_to_shared(st));
#pragma unroll
          for (int i = 0; i < T::kPieceIters; ++i) {
            cp_async_16_full(sb + k_lane_off + i * kKeysPerIter * T::kVB, kpg + voff + i * 512);
            cp_async_16_full(sb + v_lane_off + i * kKeysPerIter * T::kVB, vpg + voff + i * 512);
          }
          chunk_params(true);
          return;
        }
      }
#pragma unroll
      for (int i = 0; i < T::kPieceIters; ++i) {
        const int key = i * kKeysPerIter + lane_key;
        const int bytes = key < n_valid ? 16 : 0;
        cp_async_16(st + key * T::kVB + 16 * (lane_piece ^ kv_swizzle<T::kKB, false>(key)), kpg + voff + i * 512, bytes);
        cp_async_16(st + T::kVOff + key * T::kVB + 16 * (lane_piece ^ kv_swizzle<T::kVT, true>(key)), vpg + voff + i * 512,
                    bytes);
      }
      chunk_params(lane < n_valid);
      return;
    }
    // keys in several pages: per-key offsets (loc: this lane's key)
    const int64_t base = loc.page < 0 ? -1 : loc.page * p.page_bytes + head_off;
    const int64_t voff = base < 0 ? -1 : base + static_cast<int64_t>(loc.slot) * T::kVB;
#pragma unroll
    for (int i = 0; i < T::kPieceIters; ++i) {
      const int key = i * kKeysPerIter + lane_key, piece = lane_piece;
      const int64_t off = __shfl_sync(0xffffffffu, voff, key);
      const bool valid = off >= 0;
      const int64_t src = valid ? off + piece * 16 : 0;
      cp_async_16(st + key * T::kVB + 16 * (piece ^ kv_swizzle<T::kKB, false>(key)), p.k_pages + src, valid ? 16 : 0);
      cp_async_16(st + T::kVOff + key * T::kVB + 16 * (piece ^ kv_swizzle<T::kVT, true>(key)), p.v_pages + src,
                  valid ? 16 : 0);
    }
    issue_params(st, base, loc.slot);
  };
  // stages the chunk at the cursor (if any) into stage `st` and moves the cursor on
  auto issue_next = [&](int st) {
    if (iu < nu) {
      issue(st, next);
      ++iit;
      settle();
      next = locate();
    }
  };
  // The first kStages - 1 stages: before the wait when they all lie in unit 0
  // and every key they read (positions [c0, min(end, c0 + kWK)) of each chunk)
  // is below ctx - 1, so that they load while the previous kernel drains;
  // else after it.
  bool early = p.stage_before_wait != 0;
  if (iu < nu) {
    const int last_end = min(iend, ibegin + (uw + (T::kStages - 2) * kUW) * T::kWK + T::kWK);
    early = early && iu == 0 && in_mine >= T::kStages - 1 && last_end <= s_unit[0].w - 1;
  }
  auto prologue_stages = [&] {
#pragma unroll
    for (int s = 0; s < T::kStages - 1; ++s) {
      issue_next(s);
      if constexpr (!kTma) cp_async_commit();
    }
  };
  if (early) prologue_stages();
  pdl_wait_and_trigger();  // launch_pdl.cuh: the previous kernel's writes are visible from here
  if (!early) prologue_stages();
  // it % kStages; the stage written at step it, (it + kStages - 1) % kStages,
  // is the one read at step it - 1
  int read_stage = 0;
  uint32_t read_phase = 0;  // kTma: the parity of read_stage's current use
  // ldmatrix row of this lane: matrix l / 8 = (k-step, half), its row i = l % 8
  // is k index 8 half + i of the mma, i.e. key 16 k-step + 8 half + i / 2 +
  // 4 (i % 2): the key order of the value fragments (keys c, c + 4 | c + 8,
  // c + 12 in dequant_value_pair)
  // (.x2 when a warp-chunk is one k-step: lanes 16-31 give no address)
  // (kTma: the rows of tma_value_row, k index 2 c + x of the mma's half,
  // x = i % 2, c = i / 2)
  const int prow = 8 * ((lane >> 3) & (2 * T::kTiles - 1)) +
                   (kTma ? tma_value_row(lane & 1, (lane >> 1) & 3) : ((lane & 7) >> 1) + 4 * (lane & 1));

  for (int ui = 0; ui < nu; ++ui) {
    int b, kvh, split, begin, end, n_mine;
    load_unit(ui, b, kvh, split, begin, end, n_mine);
    if (begin >= end) {  // an empty split (short sequence) or an empty context
      attn::write_empty_split<D>(p, b, kvh, split, utid, kUW * 32);
      continue;
    }
    // ---- Q as B fragments: head g8 (zero past the group), pre-scaled fp16 ----
    // Every warp of the unit needs the same fragments: its warp w converts
    // the k-steps [w kQPer, (w + 1) kQPer) for every lane and shares them
    // through shared memory, 1 / kUW of the work each: kUW 4 in the small
    // merge area (free here); kSides in stage kStages - 1 of warp w's ring
    // (first written at the loop's first step, after the barrier below).
    // KV4 keys come out as 1024 + 16 t at the odd pairs of a word (dequant_key):
    // their q is divided by 16 (fp16, exact but for subnormals). sq sums the
    // effective q (16 x the operand there), sb the operands themselves:
    // acc = 1024 sb + sum q_eff t, so q . (t - z) = acc - 1024 sb - z sq.
    constexpr int kQPer = kKSteps / kUW;  // kUW 4: 2 (D = 128) or 1 (D = 64)
    static_assert(kQPer * kUW == kKSteps);
    static_assert(kSides ? 2 * kQPer * 32 * 4 + 8 * 8 <= T::kStageBytes : 2 * kQPer * 32 * 4 <= 2 * kKSteps * 16 * 8);
    // warp w's share: [32 lanes][2 kQPer] words; its {sq, sb} of head h
    auto q_words = [&](int w) -> uint32_t* {
      if constexpr (kSides)
        return reinterpret_cast<uint32_t*>(smem + (side * kUW + w) * (T::kWarpRing + T::kPBytes) +
                                           (T::kStages - 1) * T::kStageBytes);
      else
        return reinterpret_cast<uint32_t*>(s_acc) + w * 32 * 2 * kQPer;
    };
    auto q_sums = [&](int w, int h) -> float2* {
      if constexpr (kSides)
        return reinterpret_cast<float2*>(q_words(w) + 32 * 2 * kQPer) + h;  // [8 heads] after the words
      else
        return reinterpret_cast<float2*>(s_wml) + h * kWarps + w;  // [8 heads][kWarps]
    };
    {
      const bool ok = g8 < group;
      const half* qrow = p.q + (static_cast<int64_t>(b) * hq + kvh * group + (ok ? g8 : 0)) * D;
      bool vec = false;  // D = 128, q 16-byte aligned: 16-byte loads
      if constexpr (D == 128) vec = (reinterpret_cast<uintptr_t>(p.q) & 15) == 0;
      // in pieces of (up to) 2 k-steps: one 16-byte load (vec) and one 16-byte
      // store each, so that few registers hold q at once
      constexpr int kPiece = kQPer < 2 ? kQPer : 2;
      uint32_t* mine = q_words(uw) + lane * 2 * kQPer;
      float sq = 0.f, sb = 0.f;
#pragma unroll
      for (int k0 = 0; k0 < kQPer; k0 += kPiece) {
        half qraw[kPiece][2][2];
        if (vec) {
          // thread c's 8 halves of k-steps uw kQPer + k0, + 1: at c D / 4 +
          // 4 (kQPer uw + k0) (kv_pair_element(c, 2 (kQPer uw + k0) + i, hi) =
          // that + kv_pair_local(i, hi), kQPer and k0 even)
          uint4 raw = make_uint4(0u, 0u, 0u, 0u);
          if (ok) raw = *reinterpret_cast<const uint4*>(qrow + c * (D / 4) + 4 * (kQPer * uw + k0));
          const half* qh = reinterpret_cast<const half*>(&raw);
#pragma unroll
          for (int kl = 0; kl < kPiece; ++kl)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
              for (int hi = 0; hi < 2; ++hi) qraw[kl][j][hi] = qh[kv_pair_local<DT, D>(2 * kl + j, hi)];
        } else {
#pragma unroll
          for (int kl = 0; kl < kPiece; ++kl)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
              for (int hi = 0; hi < 2; ++hi)
                qraw[kl][j][hi] = ok ? qrow[attn::kv_pair_element<DT, D>(c, 2 * (uw * kQPer + k0 + kl) + j, hi)]
                                     : __ushort_as_half(0);
        }
        uint32_t qw[kPiece][2];
#pragma unroll
        for (int kl = 0; kl < kPiece; ++kl)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            // the kb index 2 (w kQPer + k0 + kl) + j of this pair is odd when j is
            const bool by16 = DT == KvDtype::kInt4 && (j & 1);
            float v[2];
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
              const float qs = __half2float(__float2half_rn(__half2float(qraw[kl][j][hi]) * p.scale_log2));
              v[hi] = by16 ? __half2float(__float2half_rn(qs * 0.0625f)) : qs;
            }
            qw[kl][j] = attn::pack_half2(v[0], v[1]);
            sb += v[0] + v[1];
            sq += by16 ? 16.f * (v[0] + v[1]) : v[0] + v[1];
          }
        if constexpr (kPiece == 1) {
          *reinterpret_cast<uint2*>(mine + 2 * k0) = make_uint2(qw[0][0], qw[0][1]);
        } else {
          *reinterpret_cast<uint4*>(mine + 2 * k0) = make_uint4(qw[0][0], qw[0][1], qw[1][0], qw[1][1]);
        }
      }
#pragma unroll
      for (int o = 1; o <= 2; o <<= 1) {
        sq += __shfl_xor_sync(0xffffffffu, sq, o);
        sb += __shfl_xor_sync(0xffffffffu, sb, o);
      }
      if (c == 0) *q_sums(uw, g8) = make_float2(sq, sb);
    }
    unit_sync();  // every warp's share of q
    uint32_t qb[kKSteps][2];
#pragma unroll
    for (int w = 0; w < kUW; ++w) {
      const uint32_t* src = q_words(w) + lane * 2 * kQPer;
      if constexpr (kQPer == 1) {
        const uint2 u = *reinterpret_cast<const uint2*>(src);
        qb[w][0] = u.x, qb[w][1] = u.y;
      } else {
#pragma unroll
        for (int kl = 0; kl < kQPer; kl += 2) {
          const uint4 u = *reinterpret_cast<const uint4*>(src + 2 * kl);
          qb[w * kQPer + kl][0] = u.x, qb[w * kQPer + kl][1] = u.y;
          qb[w * kQPer + kl + 1][0] = u.z, qb[w * kQPer + kl + 1][1] = u.w;
        }
      }
    }
    // for the heads 2c, 2c + 1 of this thread's C fragments: sum q, 1024 x sum operand
    // negated: the score accumulators start at -(1024 sb + z sq), so that the
    // tensor cores leave q . (t - z) and one multiply by the scale remains
    float nsumq[2], nbias[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if constexpr (!kSides) {
        const float4* r = reinterpret_cast<const float4*>(q_sums(0, 2 * c + k));  // warps {0, 1}, {2, 3}
        const float4 x = r[0], y = r[1];
        nsumq[k] = -((x.x + x.z) + (y.x + y.z));
        nbias[k] = -1024.f * ((x.y + x.w) + (y.y + y.w));
      } else {
        float2 t = *q_sums(0, 2 * c + k);
#pragma unroll
        for (int w = 1; w < kUW; ++w) {
          const float2 x = *q_sums(w, 2 * c + k);
          t.x += x.x, t.y += x.y;
        }
        nsumq[k] = -t.x;
        nbias[k] = -1024.f * t.y;
      }
    }
    // kSides, 2 warps: both are done reading q's shares before either
    // stages into the ring stage that holds them (one warp: its own
    // __syncwarp at the loop's first step orders that)
    if constexpr (kSides && kUW > 1) unit_sync();

    // ---- online softmax state of the heads 2c, 2c + 1 ------------------------
    // (mu: m with -inf as 0, the exponent's reference)
    float m[2] = {-INFINITY, -INFINITY}, mu[2] = {0.f, 0.f}, l[2] = {0.f, 0.f}, corr[2] = {0.f, 0.f};
    float o[kKSteps][4];
#pragma unroll
    for (int e = 0; e < kKSteps; ++e) o[e][0] = o[e][1] = o[e][2] = o[e][3] = 0.f;

    for (int it = 0; it < n_mine; ++it) {
      if constexpr (kTma) {
        ptx::mbar_wait(stage_bar(read_stage), read_phase);
        if (read_stage == T::kStages - 1) read_phase ^= 1u;
      } else {
        cp_async_wait<T::kStages - 2>();
      }
      __syncwarp();  // (also: every lane is done with the stage read last step)
      issue_next(read_stage == 0 ? T::kStages - 1 : read_stage - 1);
      if constexpr (!kTma) cp_async_commit();
      const uint8_t* kst = kv_stage(read_stage);
      const uint8_t* pst = par_stage(read_stage);
      read_stage = read_stage == T::kStages - 1 ? 0 : read_stage + 1;
      const uint8_t* vst = kst + T::kVOff;
      const int c0 = begin + (uw + it * kUW) * T::kWK;

      // 1. scores S^T for kTiles tiles of 16 keys
      float s[T::kTiles][4];
      uint32_t vsz[T::kTiles][2];  // the V {scale, zero} of keys 16 t + g8 + 8 r, for step 3
#pragma unroll
      for (int t = 0; t < T::kTiles; ++t) {
        float sc[2] = {1.f, 1.f};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if constexpr (T::kParams) {
            const int key = 16 * t + g8 + 8 * r;
            uint2 kv;
            if constexpr (kTma) {
              kv.x = *reinterpret_cast<const uint32_t*>(pst + key * 4);
              kv.y = *reinterpret_cast<const uint32_t*>(pst + (T::kWK + key) * 4);
            } else {
              kv = *reinterpret_cast<const uint2*>(pst + key * 8);
            }
            const half2 ksz = as_half2(kv.x);
            vsz[t][r] = kv.y;
            sc[r] = __low2float(ksz);
            const float z = __high2float(ksz);
            s[t][2 * r] = fmaf(z, nsumq[0], nbias[0]);
            s[t][2 * r + 1] = fmaf(z, nsumq[1], nbias[1]);
          } else {
            s[t][2 * r] = s[t][2 * r + 1] = 0.f;
          }
        }
        uint32_t klo[D / 8], khi[D / 8];
        {
          const int r0 = 16 * t + g8, r1 = r0 + 8;
          uint32_t w0[T::kKB / 4], w1[T::kKB / 4];
          read_slice<T::kKB>(kst + r0 * T::kVB, c, kTma ? tma_key_swizzle(g8) : kv_swizzle<T::kKB, false>(r0), w0);
          read_slice<T::kKB>(kst + r1 * T::kVB, c, kTma ? tma_key_swizzle(g8) : kv_swizzle<T::kKB, false>(r1), w1);
          dequant_key<DT, T::kKB / 4>(w0, klo);
          dequant_key<DT, T::kKB / 4>(w1, khi);
        }
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          const uint32_t a[4] = {klo[2 * kk], khi[2 * kk], klo[2 * kk + 1], khi[2 * kk + 1]};
          attn::mma_16816(s[t], a, qb[kk][0], qb[kk][1]);
        }
        if constexpr (T::kParams) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            s[t][2 * r] *= sc[r];
            s[t][2 * r + 1] *= sc[r];
          }
        }
      }
      if (c0 + T::kWK > end) {  // the last warp-chunk: mask the keys past the end
#pragma unroll
        for (int t = 0; t < T::kTiles; ++t)
#pragma unroll
          for (int r = 0; r < 2; ++r)
            if (c0 + 16 * t + g8 + 8 * r >= end) {
              s[t][2 * r] = s[t][2 * r + 1] = -INFINITY;
              if constexpr (kTma) vsz[t][r] = 0u;  // (TMA staged the stale {scale, zero} of the page there)
            }
      }
      // 2. online softmax per head (column). The column max is needed only
      // when the running max m grows, i.e. when some thread's own max exceeds
      // it (rare after the first chunks): one vote decides, and only then do
      // the 3 shuffles reduce the column (the same m as reducing every chunk).
      {
        float mx[2] = {fmaxf(s[0][0], s[0][2]), fmaxf(s[0][1], s[0][3])};
#pragma unroll
        for (int t = 1; t < T::kTiles; ++t)
#pragma unroll
          for (int k = 0; k < 2; ++k) mx[k] = fmaxf(mx[k], fmaxf(s[t][k], s[t][2 + k]));
        const bool grew = mx[0] > m[0] || mx[1] > m[1];
        if (__any_sync(0xffffffffu, grew)) {  // rescale only when a max grew
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffffu, mx[k], 4));
            mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffffu, mx[k], 8));
            mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffffu, mx[k], 16));
          }
          float alpha[2];
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            const float m_new = fmaxf(m[k], mx[k]);
            alpha[k] = fast_exp2(m[k] - (m_new == -INFINITY ? 0.f : m_new));
            m[k] = m_new;
            mu[k] = m_new == -INFINITY ? 0.f : m_new;
            l[k] *= alpha[k];
            corr[k] *= alpha[k];
          }
#pragma unroll
          for (int e = 0; e < kKSteps; ++e) {
            o[e][0] *= alpha[0];
            o[e][1] *= alpha[1];
            o[e][2] *= alpha[0];
            o[e][3] *= alpha[1];
          }
        }
      }
      // 3. P' = p s_v -> the P buffer (key-major: this thread's two heads of
      // a key are one half2), corr += P' z
#pragma unroll
      for (int t = 0; t < T::kTiles; ++t)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int key = 16 * t + g8 + 8 * r;
          float sv = 1.f, zv = 0.f;
          if constexpr (T::kParams) {
            const half2 sz = as_half2(vsz[t][r]);
            sv = __low2float(sz);
            zv = __high2float(sz);
          }
          const float p0 = fast_exp2(s[t][2 * r] - mu[0]), p1 = fast_exp2(s[t][2 * r + 1] - mu[1]);
          l[0] += p0;
          l[1] += p1;
          const half2 ph = __floats2half2_rn(p0 * sv, p1 * sv);
          if constexpr (T::kParams) {
            const float2 pf = __half22float2(ph);
            corr[0] += pf.x * zv;
            corr[1] += pf.y * zv;
          }
          *reinterpret_cast<half2*>(s_p + key * 8 + 2 * c) = ph;
        }
      __syncwarp();
      // 4. O^T += V^T P'^T, one k-step per 16 keys; B fragments by ldmatrix.trans
      uint32_t pb[2 * T::kTiles];
      ldmatrix_trans<2 * T::kTiles>(pb, s_p + prow * 8);
#pragma unroll
      for (int ks = 0; ks < T::kTiles; ++ks) {
        const uint32_t b0 = pb[2 * ks], b1 = pb[2 * ks + 1];
        uint32_t va[D / 8], vc[D / 8];
        {
          uint32_t w[4][T::kVT / 4];
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            if constexpr (kTma) {
              const int r = 16 * ks + tma_value_row(x, c);
              read_slice<T::kVT>(vst + r * T::kVB, g8, tma_value_swizzle(x, c), w[x]);
            } else {
              const int r = 16 * ks + c + 4 * x;
              read_slice<T::kVT>(vst + r * T::kVB, g8, kv_swizzle<T::kVT, true>(r), w[x]);
            }
          }
          dequant_value_pair<DT, T::kVT / 4, kSubV>(w[0], w[1], va);  // keys c, c + 4
          dequant_value_pair<DT, T::kVT / 4, kSubV>(w[2], w[3], vc);  // keys c + 8, c + 12
        }
#pragma unroll
        for (int e = 0; e < kKSteps; ++e) {
          const uint32_t a[4] = {va[2 * e], va[2 * e + 1], vc[2 * e], vc[2 * e + 1]};
          attn::mma_16816(o[e], a, b0, b1);
        }
      }
    }

    if constexpr (kSubV) {
      // subnormal value codes: rows g8 of each m-tile hold sum P' t 2^-24; rows
      // g8 + 8 the same, KV4 16 t (odd nibbles): scale back (exact)
      constexpr float kOdd = DT == KvDtype::kInt4 ? 0x1p20f : 0x1p24f;
#pragma unroll
      for (int e = 0; e < kKSteps; ++e) {
        o[e][0] *= 0x1p24f;
        o[e][1] *= 0x1p24f;
        o[e][2] *= kOdd;
        o[e][3] *= kOdd;
      }
    }
    // ---- merge the 4 warps' states -------------------------------------------
    // (the unit's sequence, head and split reloaded from the table: fewer
    // registers live through the loop)
    {
      const int4 e = s_unit[ui];
      b = e.x, kvh = e.y, split = e.z;
    }
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      l[k] += __shfl_xor_sync(0xffffffffu, l[k], 4);
      l[k] += __shfl_xor_sync(0xffffffffu, l[k], 8);
      l[k] += __shfl_xor_sync(0xffffffffu, l[k], 16);
      corr[k] += __shfl_xor_sync(0xffffffffu, corr[k], 4);
      corr[k] += __shfl_xor_sync(0xffffffffu, corr[k], 8);
      corr[k] += __shfl_xor_sync(0xffffffffu, corr[k], 16);
    }
    if (!kSides && ui + 1 < nu) {
      // Not the block's last unit: the rings hold the next unit's first
      // stages, so the merge stays in the small area after them: {m, l} per
      // warp and head, then the warps add their weighted O in turn into one
      // accumulator (groups <= 4: the heads of lanes c < 2; thread-major, free
      // of bank conflicts), and the last warp writes the output. (The area
      // also carries q's fragments at a unit's start: barriers before and after.)
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < 2; ++kk)
        if (g8 == 0) {
          s_wml[(warp * 8 + 2 * c + kk) * 2] = m[kk];
          s_wml[(warp * 8 + 2 * c + kk) * 2 + 1] = l[kk];
        }
      __syncthreads();
      float wgt[2], mx[2], den[2];
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const int h = 2 * c + kk;
        mx[kk] = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; ++w)
          if (s_wml[(w * 8 + h) * 2 + 1] > 0.f) mx[kk] = fmaxf(mx[kk], s_wml[(w * 8 + h) * 2]);
        den[kk] = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
          const float lw = s_wml[(w * 8 + h) * 2 + 1];
          if (lw > 0.f) den[kk] += exp2f(s_wml[(w * 8 + h) * 2] - mx[kk]) * lw;
        }
        wgt[kk] = l[kk] > 0.f ? exp2f(m[kk] - mx[kk]) : 0.f;
      }
      const bool live = c < 2;  // heads 2c, 2c + 1 < 4
      for (int step = 0; step < kWarps; ++step) {
        if (warp == step && live) {
#pragma unroll
          for (int kk = 0; kk < 2; ++kk) {
            const int h = 2 * c + kk;
            const int64_t row = static_cast<int64_t>(b) * hq + kvh * group + h;
#pragma unroll
            for (int e = 0; e < kKSteps; ++e) {
              float2* acc = s_acc + (kk * kKSteps + e) * 16 + g8 * 2 + c;
              float2 v = make_float2(wgt[kk] * (o[e][kk] - corr[kk]), wgt[kk] * (o[e][2 + kk] - corr[kk]));
              if (step > 0) {
                const float2 a = *acc;
                v.x += a.x, v.y += a.y;
              }
              if (step + 1 < kWarps) {
                *acc = v;
              } else if (h < group) {
                const int d = g8 * (D / 8) + 2 * e;  // dims d, d + 1 of this thread's slice
                if (p.num_splits == 1) {
                  *reinterpret_cast<half2*>(p.out + row * D + d) = __floats2half2_rn(v.x / den[kk], v.y / den[kk]);
                } else {
                  *reinterpret_cast<float2*>(p.part_o + (row * p.num_splits + split) * D + d) = v;
                }
              }
            }
            if (step + 1 == kWarps && h < group && g8 == 0 && p.num_splits > 1) {
              p.part_ml[(row * p.num_splits + split) * 2] = mx[kk];
              p.part_ml[(row * p.num_splits + split) * 2 + 1] = den[kk];
            }
          }
        }
        __syncthreads();
      }
      continue;
    }
    // The block's last unit: every ring is idle, the merge uses their space:
    // O [warp][head][kORow] (this thread's D / 8 consecutive dims g8 D / 8..
    // of heads 2c, 2c + 1 as 16-byte stores) and {m, l} [head][warp]; then
    // thread (head h, dims 8j..8j + 7) weighs the warps' states once and
    // writes its 8 outputs with one store.
    // (kSides: each side in its own warps' rings, under its own barrier)
    cp_async_wait<0>();
    unit_sync();  // every warp of the unit is done with its ring
    constexpr int kORow = D + 4;  // floats: rows 16-byte aligned
    static_assert(T::kWarpRing + T::kPBytes >= 8 * kORow * 4 + 8 * 8);  // a warp's share of the area
    float* s_o = reinterpret_cast<float*>(smem + side * kUW * (T::kWarpRing + T::kPBytes));  // [kUW][8][kORow]
    float2* s_ml = reinterpret_cast<float2*>(s_o + kUW * 8 * kORow);                         // [8][kUW]
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int h = 2 * c + k;
      float4* so = reinterpret_cast<float4*>(s_o + (uw * 8 + h) * kORow + g8 * (D / 8));
#pragma unroll
      for (int e = 0; e < kKSteps; e += 2)  // dims 2e, 2e + 1, 2e + 2, 2e + 3 of the slice
        so[e / 2] = make_float4(o[e][k] - corr[k], o[e][2 + k] - corr[k], o[e + 1][k] - corr[k], o[e + 1][2 + k] - corr[k]);
      if (g8 == 0) s_ml[h * kUW + uw] = make_float2(m[k], l[k]);
    }
    unit_sync();
    constexpr int kRuns = D / 8;  // 8-dim runs per head
    // (one pass when the unit has 4 warps; group 8 takes two passes of 2 warps, four of 1)
    for (int t = utid; t < group * kRuns; t += kUW * 32) {
      const int h = t / kRuns, d0 = (t % kRuns) * 8;
      float2 ml[kUW];
      if constexpr (kUW == 1) {
        ml[0] = s_ml[h];
      } else {
#pragma unroll
        for (int w = 0; w < kUW; w += 2) {
          const float4 x = *reinterpret_cast<const float4*>(s_ml + h * kUW + w);
          ml[w] = make_float2(x.x, x.y), ml[w + 1] = make_float2(x.z, x.w);
        }
      }
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kUW; ++w)
        if (ml[w].y > 0.f) mx = fmaxf(mx, ml[w].x);
      float wt[kUW], den = 0.f;
#pragma unroll
      for (int w = 0; w < kUW; ++w) {
        wt[w] = ml[w].y > 0.f ? exp2f(ml[w].x - mx) : 0.f;
        den += wt[w] * ml[w].y;
      }
      float num[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) num[i] = 0.f;
#pragma unroll
      for (int w = 0; w < kUW; ++w) {
        const float4* so = reinterpret_cast<const float4*>(s_o + (w * 8 + h) * kORow + d0);
        const float4 x = so[0], y = so[1];
        num[0] += wt[w] * x.x, num[1] += wt[w] * x.y, num[2] += wt[w] * x.z, num[3] += wt[w] * x.w;
        num[4] += wt[w] * y.x, num[5] += wt[w] * y.y, num[6] += wt[w] * y.z, num[7] += wt[w] * y.w;
      }
      const int64_t row = static_cast<int64_t>(b) * hq + kvh * group + h;
      if (p.num_splits == 1) {
        const float inv = den > 0.f ? 1.f / den : 0.f;
        uint32_t packed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) packed[i] = attn::pack_half2(num[2 * i] * inv, num[2 * i + 1] * inv);
        half* dst = p.out + row * D + d0;
        if ((reinterpret_cast<uintptr_t>(p.out) & 15) == 0) {
          *reinterpret_cast<uint4*>(dst) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const half2 hv = as_half2(packed[i]);
            dst[2 * i] = __low2half(hv);
            dst[2 * i + 1] = __high2half(hv);
          }
        }
      } else {
        float2* dst = reinterpret_cast<float2*>(p.part_o + (row * p.num_splits + split) * D + d0);
#pragma unroll
        for (int i = 0; i < 4; ++i) dst[i] = make_float2(num[2 * i], num[2 * i + 1]);
        if (d0 == 0) {
          p.part_ml[(row * p.num_splits + split) * 2] = mx;
          p.part_ml[(row * p.num_splits + split) * 2 + 1] = den;
        }
      }
      if constexpr (!kSides) break;  // (group x kRuns <= kThreads: one pass)
    }
  }
}

template <KvDtype DT, int D, bool kTma = false>
constexpr int smem_bytes() {  // either value variant
  if constexpr (kTma) return MmaTraits<DT, D>::kTmaSmemBytes;
  return MmaTraits<DT, D>::kSmemBytes;
}

}  // namespace qserve::cuda::mmat
