// The sm_90a W4A8 kernel: Y^T = W X^T on INT8 wgmma (docs/gemm-hopper.md).
//
// Operand order: the wgmma M dimension is output channels (A = the weights,
// dequantized to INT8 in registers right before the MMA: wgmma's register-A
// fragment per warp is the mma.sync m16n8k32 A fragment, so the repacked
// compute order of quant/w4a8_repack.h serves unchanged, one 16-B shared
// load per lane per 16 x 64 tile), N is tokens (B = activations X [m, k],
// K-major, TMA'd into 128-B-swizzled shared memory), K input channels.
//
// Warp specialization (384 threads, one CTA per SM, persistent; OCC = 2:
// two CTAs per SM, 80 registers a thread at launch, setmaxnreg 24 / 104):
//   warpgroup 0 (setmaxnreg 40; kernels/gemm_w4a8_wgmma_producer.cuh): per 128-wide k stage, after waiting for
//     its `empty` mbarrier, thread 0 issues MT bulk copies of the weights
//     (8 KB = 128 channels x 128 k, contiguous in the repacked layout) and,
//     g128, MT copies of the group's level-2 words (256 B per 128-channel
//     block, block-major in quant/w4a8_repack.h), lane 0 of warp 1 one TMA
//     tensor box X [BM rows][128 B], each on the stage's `full` mbarrier
//     (the s8 tiles and the multicast pairs: thread 0 issues both);
//   warpgroups 1, 2 (setmaxnreg 232): each owns 64 * MT channels; per stage:
//     wait `full`, LDS.128 + unpack (+ level-2 dequant) the weights, 4 * MT
//     wgmma m64nBMk32; two stages in flight (the dequantization of stage
//     k + 1 overlaps the wgmmas of stage k), a stage released with one
//     arrival per warp on `empty` once its wgmmas have completed.
// Programmatic dependent launch (kernels/pdl.cuh): the weights are issued
// without waiting (the ring fills while the previous kernel finishes), the
// activations after the dependency wait (one issuing thread: the first
// STAGES stages' weights before it); the consumers wait before the
// epilogue's reads and writes.
// Work units (n block, m block, k range) are walked by the persistent CTAs
// (kernels/gemm_w4a8_wgmma_units.cuh): split-K units strided over the CTAs,
// m fastest (the CTAs running together share weight blocks in L2), or
// stream-K (the tiles' k stages cut into one equal range per CTA). A tile
// computed in pieces: each piece stores INT32 partials; the last CTA of the
// tile to arrive (a counter) sums them and runs the epilogue, as in the
// mma.sync kernel.
// kCL (the cluster tiles): one CTA per unit, the splits of one output tile
// are the CTAs of one cluster (split fastest in the unit order); each stores
// its partial tile in its own shared memory, and after a cluster barrier CTA
// r sums slice r of the tile over the cluster (distributed shared memory)
// and runs the epilogue on it (kernels/gemm_w4a8_wgmma_cluster.cuh).
// kUN (a cluster tile's unsplit twin, launched without a cluster when
// p.splits == 1): no partial tile to share, so the staged epilogue of the
// other tiles runs instead of the cluster's (its buffers in the stages, free
// by then); its own instantiation, so that the split kernels keep their code.
// kPR (a cluster tile's push form of kPR splits, BM >= 16; 2: the pair form;
// launched unless switched off, gemm_w4a8_switches.h): the CTAs exchange parts of the tile instead
// of summing slices by distributed shared-memory loads. The tile's BM / 8
// token groups are owned by the first ranks, kOwn each (push_own_groups:
// a half for the pair). After a cluster barrier (all done with their
// stages) each CTA stores its partial of every other owner's groups into
// that owner's stages (16-B st.shared::cluster, register order: piece
// (j, i) of thread ctid from the sender d ranks after the owner at
// [((d - 1) * MT + j) * kOwn + i) * 256 + ctid] x 16 B; kBN64: 128 threads), and after a second
// barrier (release / acquire) each owner adds what it received to its own
// groups and runs the staged epilogue on those 8 kOwn token rows (rank r
// from row 8 kOwn r); a rank past the owners only sends. Where the shared
// memory holds the received parts beside the stages (push_recv_apart) and
// p.push_recv_apart: they go to a region of their own past the barriers
// instead, and the first barrier becomes a split one, arrived at the
// kernel's start (every CTA of the cluster running) and waited for before
// the stores.
// kBN64 (the 64-channel cluster tiles, MT = 1: BN = 64): channel block n_blk
// of 64 is 16-channel tiles 4 (n_blk % 2) .. + 3 of the repacked weights'
// 128-channel block n_blk / 2; the producer copies those 2 KB of each k64
// half (g128: and the block's level-2 words) where a 128-channel CTA's stage
// has them, and consumer warpgroup 0 computes them as its m64 tile n_blk % 2
// (the offsets of that tile). Consumer warpgroup 1 loads, unpacks and issues
// nothing and holds no accumulators: it takes part in the cluster barriers
// only (as the producer warpgroup does after its copies); the `empty`
// barriers count warpgroup 0's 4 warps, and the exchange, the partial tile
// and the epilogue cover warpgroup 0's 64 channels (128 threads).
// kMC (multicast pairs): a cluster of two CTAs walks pairs of n blocks
// (rank r: n block 2 j + r) over the same token blocks and k ranges; each
// producer loads rows [r BM / 2, (r + 1) BM / 2) of a stage's X box and
// multicasts them into both CTAs (same offset, each CTA's `full` counting the
// whole stage), its own weights as before; every consumer warp releases a
// stage on both CTAs' `empty` barriers (16 arrivals), since the other
// producer writes into this CTA's slot too. Cluster barriers after the
// barriers' initialization and before exit.
//
// Shared memory: X stages [STAGES][BM][128 B] (1024-B aligned, TMA 128-B
// swizzle: 16-B chunk c of row r at c ^ (r & 7)), W stages [STAGES][MT][8 KB]
// ([2 k64 halves][8 tiles of 16 channels][32 lanes][16 B]), the level-2
// words [STAGES][8 MT tiles][8] uint32, then mbarriers, the split-K flag and
// the staged epilogue's buffers, or the TMA stores' staging (tma_epilogue
// tiles); none for the cluster tiles, whose epilogue reuses the X and W
// stages (gemm_w4a8_wgmma_cluster.cuh).
//
// kS8 (the INT8-weight tiles): the weights are INT8 [n, k] row-major, read
// by a second tensor map like X (box [128 MT rows][128 B], 128-B swizzle:
// W stages [STAGES][128 MT][128 B]); both wgmma operands come from shared
// memory (A = the stage's rows 64 mi.., K-major, the same descriptor form as
// B), so the consumers only wait, issue and release. Used for W8A8, and for
// g128 / per-channel W4 after a dequantization pass (gemm_w4a8_dequant.cu)
// when asked for (no plan takes that path since round 6).
//
// KD > 1 (deep stages, W4 tiles): a pipeline stage holds
// KD consecutive 128-wide k blocks, laid out as KD one-block stages would be
// ([KD][BM][128 B] X, [MT][KD][8 KB] weights: a block's KD pieces contiguous
// as in the repacked layout, [MT][KD][64] level-2 words), brought by KD X
// boxes, one weight copy and one level-2 copy per 128-channel block. The
// consumers step through the blocks as before and release the stage after its last.
//
// kPD (the producer-dequantizing tiles): the consumers of kS8, but the
// producer warpgroup reads the W4 weights (bulk copies into the stages, next
// to X) and writes the INT8 A tiles (two slots apart from the stages) itself,
// all 128 threads unpacking (kernels/gemm_w4a8_wgmma_pd.cuh): no pass, the
// weights read once at 4 bits.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda.h>
#include <cuda_fp16.h>

#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "backend/cuda/kernels/gemm_hopper_primitives.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_cluster.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_pd.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_producer.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_stage.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_timeline.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_units.cuh"
#include "backend/cuda/kernels/pdl.cuh"
#include "quant/gemm_epilogue.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda::w4a8::wgmma {

template <int BM, int MT, int STAGES, bool kG128, int ASETS, bool kS8 = false, bool kPD = false, bool kCL = false,
          int KD = 1, bool kSK = false, bool kMC = false, int OCC = 1, bool kUN = false, int kPR = 0,
          bool kBN64 = false>
__global__ void __launch_bounds__(kThreads, OCC)
    gemm_w4a8_wgmma_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                           const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(!kSK || (!kS8 && !kPD && !kCL && KD == 1), "stream-K: the persistent W4 tiles");
  static_assert(OCC == 1 || (OCC == 2 && !kPD), "one or two CTAs per SM (TileShape::occ); pd: one");
  static_assert(!kMC || (!kS8 && !kPD && !kCL && KD == 1 && !kSK && BM % 16 == 0),
                "multicast pairs: the persistent W4 tiles, split-K");
  // kPD: the stages hold X and the W4 staging [MT][8 KB], the INT8 A tiles
  // (as kS8's) have two slots of their own.
  constexpr bool kSS = kS8 || kPD;  // both wgmma operands in shared memory
  // g128 W4 tiles (register A): the weights biased by 128 (unpack8, u8 x s8
  // wgmmas); the accumulators are made exact before any epilogue (unbias_acc
  // with the token's code sum p.x_sum). kSS tiles read signed INT8 weights.
  constexpr bool kBiasedW = kG128 && !kSS;
  // Per-channel W4 tiles (register A): the rows g + 8 of each m-tile at 16 x
  // their weights (load_stage's unpack8_pc16, u8 x s8 wgmmas); those
  // accumulators are made exact before any epilogue (pc_rows8_exact).
  constexpr bool kPc16W = !kG128 && !kSS;
  // The producer's activations issued by a thread of their own (see the producer).
  constexpr bool kXThread = x_thread_issues(kS8, kPD, kMC);
  // Whole wgmma groups (load_stage): the wide token tiles. The 64-token tiles
  // of one m-tile a warpgroup commit each wgmma as a group of its own
  // (issue_stage's kSplit; 1-4% on their per-channel rows, round 45); the
  // others keep one group a stage, which ptxas splits for the first register
  // set by itself (with every wgmma a group the 16 / 32-token and 256 x 64
  // tiles lost 2-12%, round 45).
  constexpr bool kWholeGroups = BM >= 128;
  constexpr bool kSplitGroups = BM == 64 && MT == 1;
  // The register-A cluster tiles' main loop unrolled over groups of stages
  // (kGroupSteps steps, an even number for the two register sets; launch.h's
  // ring_group_stages): stage offsets within a group, parities and release
  // decisions as constants (the consumers below). Not the 256 x 128 tile: with
  // 128 accumulators a thread, its unrolled loop made ptxas serialize the
  // wgmmas (C7512).
  constexpr int kGroupStages = ring_group_stages(STAGES, KD), kGroupSteps = kGroupStages * KD;
  constexpr bool kRing = kCL && !kSS && BM * MT <= 128 && kGroupSteps <= kMaxRingGroupSteps;
  // (cluster_reduce_epilogue unbiases every g128 accumulator: W4 tiles only)
  static_assert(!kCL || !kSS, "the cluster tiles: W4 weights in registers");
  static_assert(!kUN || kCL, "the unsplit twins: of the cluster tiles");
  static_assert(!kPR || (kCL && !kUN && BM % 16 == 0 && kPR >= 2 && kPR <= kMaxClusterSplits),
                "the push forms: cluster tiles of token groups in pairs");
  static_assert(!kBN64 || (kCL && MT == 1 && !kSS && !kMC && OCC == 1), "64 channels: cluster tiles of one m64 tile");
  // The consumer threads that hold accumulators (kBN64: warpgroup 0's), and
  // the bytes of one 8-token group of their m64 tile j (one 16-B piece each).
  constexpr int kAccThreads = kBN64 ? 128 : 256, kGroupBytes = kAccThreads * 16;
  constexpr int kXBytes = BM * 128, kWBytes = MT * (kSS ? 16384 : 8192), kW4Bytes = kPD ? MT * 8192 : 0;
  // Level-2 words per 128-wide block (W4 tiles of g128; per-channel stages have no such region: kind_shape).
  constexpr int kL2Bytes = kSS || !kG128 ? 0 : MT * 256;
  static_assert(KD == 1 || !kSS, "deep stages: W4 tiles only");
  // One stage: KD blocks (kXBytes, kWBytes, kL2Bytes are per block).
  constexpr int kXStage = KD * kXBytes, kWStage = KD * kWBytes, kL2Stage = KD * kL2Bytes;
  constexpr int kWSlots = kPD ? 2 : STAGES;  // buffers of ws
  // kPD register split (x 128 producer + x 256 consumer threads <= 168 x 384):
  // the producer unpacks, so it needs more than 40; the consumers of the
  // 256-wide tiles hold 128 accumulators and need 224 (ptxas -v: no spills).
  constexpr int kPdProducerRegs = BM * MT >= 256 ? 56 : 88, kPdConsumerRegs = BM * MT >= 256 ? 224 : 208;
  extern __shared__ uint8_t smem_raw[];
  // Align to 1024 B (the 128-B swizzle atom) by an offset from smem_raw, so
  // that the compiler still knows the pointers are shared (LDS, not LD).
  uint8_t* smem = smem_raw + ((1024u - (ptx::smem_addr(smem_raw) & 1023u)) & 1023u);
  // (kPD: the two A slots first, then X.)
  uint8_t* ws = kPD ? smem : smem + STAGES * kXStage;  // [kWSlots][MT][KD][8192 or 16384]
  uint8_t* xs = kPD ? smem + kWSlots * kWBytes : smem;  // [STAGES][KD][BM][128]
  uint8_t* w4s = xs + STAGES * kXBytes;         // kPD: [STAGES][MT][8192] (after X)
  uint32_t* l2s = reinterpret_cast<uint32_t*>(ws + STAGES * kWStage);  // W4 tiles: [STAGES][MT][KD][8][8]
  uint64_t* full =
      reinterpret_cast<uint64_t*>(kPD ? w4s + STAGES * kW4Bytes : ws + STAGES * kWStage + STAGES * kL2Stage);
  uint64_t* empty = full + STAGES;
  uint64_t* afull = empty + STAGES;             // kPD: [2] the A slot is written
  uint64_t* aempty = afull + 2;                 // kPD: [2] the consumers are done with the A slot
  // kCL: s_is_last, epi and fac point past the allocation (smem_bytes leaves
  // the epilogue's buffers out) and are never used.
  int* s_is_last = reinterpret_cast<int*>(afull + (kPD ? 4 : 0));
  // kPR with p.push_async: the barrier on which the other ranks' parts arrive
  // (st_async_v4), in the second half of the split-K flag's 16 bytes.
  uint64_t* recv_bar = reinterpret_cast<uint64_t*>(s_is_last) + 1;
  // (Every field that sizes the shared memory, as the host computed it: smem_bytes.)
  constexpr TileShape kShape{BM, MT, STAGES, ASETS, kS8, kPD, kCL, KD, kMC, OCC, kG128, kBN64};
  static_assert(kShape.stage_bytes() == kXStage + (kPD ? KD * MT * 8192 : kWStage) + kL2Stage,
                "the host's stage (TileShape::stage_bytes) is the kernel's");
  constexpr int kEpiBufs = epi_buffers(kShape);
  constexpr bool kTmaEpi = tma_epilogue(kShape);  // 128 x 192..256: outputs stored through TMA (launch.h)
  // Staged chunks: [2 warpgroups][kEpiBufs][epi_chunk(BM, MT)][epi_row_bytes(MT)];
  // kTmaEpi: 1024-B aligned, [2 warpgroups][MT][tma_epi_rows(BM)][128 B] (128-B swizzle).
  // kUN: the staging and the factors in the stages (smem, 1024-B aligned);
  // kPR: after the received parts [kPR - 1][MT][kOwn][kAccThreads][16 B] (push_recv_bytes).
  // kEpiRows: the token rows this CTA stores (kPR: its kOwn token groups).
  constexpr int kOwn = kPR ? push_own_groups(BM, kPR) : BM / 8, kOwners = BM / 8 / kOwn;
  constexpr int kEpiRows = 8 * kOwn;
  uint8_t* epi = kUN ? smem : kPR ? smem + push_recv_bytes(kShape, kPR) : reinterpret_cast<uint8_t*>(s_is_last) + 16;
  // ra: the received parts [kPR - 1][MT][kOwn][kAccThreads][16 B] past the barriers
  // (launch: push_smem_bytes holds them); else at the stages' start.
  const bool ra = kPR && push_recv_apart(kShape, kPR) && p.push_recv_apart;
  uint8_t* recv_base = smem;
  if (ra) {
    uint8_t* past = reinterpret_cast<uint8_t*>(s_is_last) + 16;
    recv_base = past + ((128u - (ptx::smem_addr(past) & 127u)) & 127u);
  }
  uint8_t* tstage = epi + ((1024u - (ptx::smem_addr(epi) & 1023u)) & 1023u);
  // The per-token factors [2 warpgroups][s_x, a_sum][BM] f32.
  float* fac = reinterpret_cast<float*>(kTmaEpi ? tstage + 2 * MT * tma_epi_box_bytes(BM)
                                                : epi + epi_staging_bytes(kEpiRows, MT, kEpiBufs));

  const int k64_total = p.k >> 6;
  const int kt_total = (k64_total + 1) >> 1;  // 128-wide stages (the last may be half)
  if (threadIdx.x == 0) {
    timeline_mark(p, kTlEntry);
    timeline_mark_sm(p);
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptx::mbar_init(&full[s], kXThread ? 2 : 1);  // the issuing threads' arrivals (below)
      // One arrival per consumer warp (kPD: and producer warp; kMC: of both
      // CTAs; kBN64: warpgroup 0's).
      ptx::mbar_init(&empty[s], kPD ? 8 + 4 : kMC ? 2 * 8 : kBN64 ? 4 : 8);
    }
    if constexpr (kPD)
      for (int a = 0; a < 2; ++a) {
        ptx::mbar_init(&afull[a], 128);  // one arrival per producer thread
        ptx::mbar_init(&aempty[a], 8);   // one arrival per consumer warp
      }
    if constexpr (kPR > 0) ptx::mbar_init(recv_bar, 1);  // one arrival: the owner's expect_tx
    ptx::fence_mbar_init();
  }
  // kMC: both CTAs' barriers are initialized before either multicasts into
  // the other or arrives on its barriers.
  if constexpr (kMC)
    ptx::cluster_sync();
  else
    __syncthreads();
  // ra: the first of the push form's barriers, split: this CTA is running
  // (its received-parts region may be written) once every thread arrived.
  if (ra) ptx::cluster_arrive_relaxed();

  // Dependents (the next kernel of the stream) may be scheduled once every
  // CTA is running: they start as this grid's CTAs exit (kernels/pdl.cuh).
  ptx::pdl_trigger();

  // The cluster tiles' barriers for a warpgroup without accumulators (the
  // producer after its copies; kBN64: consumer warpgroup 1): every thread of
  // the cluster takes part. kPR: the consumers' sequence (ra: the first one's
  // wait, arrived at the start; push_async: no second, the parts arrive on
  // mbarriers); the cluster reduction: its two barriers; kUN: none.
  const auto cluster_barriers_only = [&] {
    if constexpr (kPR > 0) {
      if (!ra) ptx::cluster_arrive_relaxed();
      ptx::cluster_wait();
      if (!p.push_async) ptx::cluster_sync();
    } else if constexpr (kCL && !kUN) {
      cluster_reduce_barriers_only(p.splits);
    }
  };
  const int wg = threadIdx.x >> 7;
  if (wg == 0 && kPD) {
    // ---------------- producer: W4 loads + dequantization (all 128 threads) ----------------
    ptx::setmaxnreg_dec<kPdProducerRegs>();
    if (threadIdx.x == 0) ptx::tma_prefetch_map(&x_map);
    produce_dequantized<BM, MT, STAGES, kG128>(&x_map, p, xs, ws, w4s, full, empty, afull, aempty);
  } else if (wg == 0) {
    // ---------------- producer ----------------
    ptx::setmaxnreg_dec<OCC == 1 ? 40 : 24>();
    produce_stages<BM, MT, STAGES, kG128, kS8, kCL, KD, kSK, kMC, OCC, kBN64>(&x_map, &w_map, p, xs, ws, l2s, full,
                                                                              empty, k64_total, kt_total);
    cluster_barriers_only();
  } else if (kBN64 && __shfl_sync(0xffffffffu, wg, 0) == 2) {
    // ---------------- kBN64: consumer warpgroup 1, idle ----------------
    // No loads, wgmmas or outputs; the cluster barriers of the consumers'
    // exchange, as the producer takes part in them. (wg through a shuffle:
    // visibly warp-uniform to ptxas, which otherwise took the consumers'
    // path for a divergent one and serialized the unsplit 64 x 32 256-deep
    // per-channel twin's wgmmas, C7520.)
    cluster_barriers_only();
  } else {
    // ---------------- consumers ----------------
    if constexpr (kPD)
      ptx::setmaxnreg_inc<kPdConsumerRegs>();
    else
      ptx::setmaxnreg_inc<OCC == 1 ? 232 : 104>();
    ptx::pdl_wait();  // before reading s_x / a_sum and writing y, partials, counters
    if (threadIdx.x == 128) timeline_mark(p, kTlConsumerAfterWait);
    const int cw = kBN64 ? 0 : wg - 1;      // consumer warpgroup 0 / 1 (kBN64: 0 only)
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, q = lane & 3;
    const int ctid = threadIdx.x - 128;     // 0..255 among consumers
    int it = 0;
    LoopClock clk;  // (a profiling build's)
    UnitWalk<kCL, kSK, kMC> walk(p, kt_total);
    Unit un;
    while (walk.next(p, kt_total, un)) {
      const int m_blk = un.m_blk, n_blk = un.n_blk, kb = un.kb, ke = un.ke;

      // m64 tile j of this warpgroup: channel block (cw * MT + j) / 2 of the
      // CTA, half (cw * MT + j) % 2 of it; this warp's 16-channel tile:
      int t16[MT];        // global 16-channel tile index
      int w_off[MT];      // byte offset of this lane's 16 B in a W stage (block 0, k64 half 0)
      int l2_off[MT];     // g128: this lane's level-2 word in a stage's [MT][KD][8][8] (block 0), -1 past n16
      if constexpr (kBN64) {
        // 64 channels: m64 tile n_blk % 2 of 128-channel block n_blk / 2, at
        // its place in the stage (the producer copies it there).
        const int tib = (n_blk & 1) * 4 + warp;
        t16[0] = (n_blk >> 1) * 8 + tib;
        w_off[0] = tib * 512 + lane * 16;
        l2_off[0] = t16[0] < p.n16 ? tib * 8 + g : -1;
      } else {
#pragma unroll
        for (int j = 0; j < MT; ++j) {
          const int mi = cw * MT + j;
          const int tib = (mi & 1) * 4 + warp;
          t16[j] = (n_blk * MT + (mi >> 1)) * 8 + tib;
          w_off[j] = (mi >> 1) * KD * 8192 + tib * 512 + lane * 16;
          l2_off[j] = t16[j] < p.n16 ? (mi >> 1) * KD * 64 + tib * 8 + g : -1;
        }
      }

      // ASETS = 2 (small token tiles): odd stages accumulate into acc_b, so
      // that consecutive stage groups do not wait on each other through the
      // accumulators; the two sets are added after the main loop. With
      // ASETS = 1, acc_b is never used (and not allocated).
      int32_t acc[MT][BM / 2], acc_b[MT][BM / 2];
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int i = 0; i < BM / 2; ++i) acc[j][i] = 0, acc_b[j][i] = 0;

      // The epilogue's factors, loaded now so that their latency hides under
      // the main loop: this thread's channel scales (registers) and, for the
      // tile's tokens, one or two per-token factors per thread that the
      // epilogue puts in shared memory (p.acc_out: unused).
      const int wtid = threadIdx.x & 127;
      float scale[MT][2], szero[MT][2];
      constexpr int kTokPerThread = (BM + 127) / 128;
      float tok_sx[kTokPerThread], tok_asum[kTokPerThread];
      if (!p.acc_out) {
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            // (s8 / W8A8: the factors exist for channels < n only)
            const int o = min(t16[j] * 16 + g + 8 * h, kS8 ? p.n - 1 : p.n16 * 16 - 1);
            scale[j][h] = p.ch_scale[o];
            szero[j][h] = kG128 ? 0.0f : p.ch_szero[o];
          }
#pragma unroll
        for (int r = 0; r < kTokPerThread; ++r) {
          const int t = min(m_blk * BM + wtid + 128 * r, p.m - 1);
          tok_sx[r] = __half2float(p.s_x[t]);
          // g128 W4: the token's code sum, its bits in the float (unbias_acc)
          tok_asum[r] = kBiasedW ? __int_as_float(p.x_sum[t]) : kG128 ? 0.0f : __half2float(p.a_sum[t]);
        }
      }

      // Two stages in flight per warpgroup: the wgmmas of stage kt run while
      // this warpgroup waits for and dequantizes stage kt + 1 into the other
      // register set (a0 / a1 alternate: the loop is unrolled by two so that
      // the register names are static). A stage is released (one arrival per
      // warp on `empty`) once wgmma.wait_group 1 says its wgmmas are done.
      int kt = kb, prev = -1;
      auto stage_of = [&](int i) { return i % STAGES; };
      auto release = [&](int s_) {
        __syncwarp();
        if (lane == 0) {
          ptx::mbar_arrive(&empty[s_]);
          if constexpr (kMC)  // the same barrier in the other CTA of the pair
            ptx::mbar_arrive_remote(ptx::map_shared_rank(ptx::smem_addr(&empty[s_]), (blockIdx.x & 1) ^ 1));
        }
      };
      auto release_a = [&](int a_) {
        __syncwarp();
        if (lane == 0) ptx::mbar_arrive(&aempty[a_]);
      };
      if constexpr (kPD) {
        // As kS8, with the A tile in slot it % 2 (written by the producer).
        for (; kt < ke; ++kt, ++it) {
          const int s = stage_of(it);
          ptx::mbar_wait(&full[s], (it / STAGES) & 1);
          ptx::mbar_wait(&afull[it & 1], (it >> 1) & 1);
          issue_stage_ss<BM, MT>(acc, ws + (it & 1) * kWBytes, cw, ptx::smem_desc_sw128(xs + s * kXBytes));
          ptx::wgmma_wait<1>();
          if (prev >= 0) release(prev), release_a((it - 1) & 1);  // the previous stage's A slot
          prev = s;
        }
      } else if constexpr (kSS) {
        // INT8 weights: nothing to prepare in registers; one group in flight
        // behind the one just issued, the stage before it released.
        for (; kt < ke; ++kt, ++it) {
          const int s = stage_of(it);
          ptx::mbar_wait(&full[s], (it / STAGES) & 1);
          issue_stage_ss<BM, MT>(acc, ws + s * kWBytes, cw, ptx::smem_desc_sw128(xs + s * kXBytes));
          ptx::wgmma_wait<1>();
          if (prev >= 0) release(prev);
          prev = s;
        }
      } else {
      // A step is one 128-wide block: block `sub` of stage `it` (KD > 1:
      // several steps per stage; the stage is released after its last).
      uint32_t a0[MT][16], a1[MT][16];
      int sub = 0;
      // Stage st = it % STAGES and its full-barrier parity ph = (it / STAGES) & 1,
      // stepped with it (no division a block); the activation descriptor as
      // stage 0's advanced by the stage's and block's offset.
      int st = stage_of(it);
      uint32_t ph = static_cast<uint32_t>(it / STAGES) & 1u;
      const uint64_t x_desc0 = ptx::smem_desc_sw128(xs);
      // Block b of stage s at full-barrier parity par into register set a; its
      // activation descriptor (s: the rolled loop's int, the ring's uint32_t).
      auto load_at = [&](auto s, uint32_t par, int b, uint32_t(&a)[MT][16]) {
        if constexpr (kTimeline) {  // the barrier wait timed on its own (load_stage's wait then passes at once)
          const long long t0 = LoopClock::now();
          ptx::mbar_wait(&full[s], par);
          clk.barrier += LoopClock::now() - t0;
        }
        load_stage<MT, kG128, kWholeGroups>(&full[s], par, ws + s * kWStage + b * 8192,
                                            l2s + s * (kL2Stage / 4) + b * 64, w_off, l2_off, a);
      };
      auto desc_at = [&](auto s, int b) { return ptx::smem_desc_advance(x_desc0, s * kXStage + b * kXBytes); };
      auto load = [&](uint32_t(&a)[MT][16]) { load_at(st, ph, sub, a); };
      auto x_desc = [&] { return desc_at(st, sub); };
      // After a step's wgmmas are issued and the previous step's are done:
      // release the previous step's stage if that step was its last block;
      // then move on (prev: this step's stage if it is its last block, else -1).
      auto next_step = [&] {
        const long long t0 = LoopClock::now();
        ptx::wgmma_wait<kGroupsPerStep<MT, kSplitGroups>>();  // the previous step's groups done
        if constexpr (kTimeline) clk.wgmma += LoopClock::now() - t0, ++clk.steps;
        if (prev >= 0) release(prev);
        const bool last_block = sub + 1 == KD || kt + 1 == ke;
        prev = last_block ? st : -1;
        ++kt;
        if (last_block) {
          sub = 0, ++it;
          if (++st == STAGES) st = 0, ph ^= 1u;
        } else {
          ++sub;
        }
      };
      if constexpr (kRing) {
        // The cluster tiles: one unit per CTA (the host launches one CTA per
        // unit, gemm_w4a8_wgmma.cpp), so the unit's first step is stage 0 at
        // parity 0. The loop walks groups of kGroupSteps steps (kGroupStages
        // stages of KD blocks, unrolled): step i of a group is block i % KD of
        // stage g0 + (i / KD) % STAGES, g0 the group's first stage (a multiple
        // of kGroupStages, or 0 for a doubled ring of two passes), at parity
        // ph ^ (i / (STAGES KD)) & 1. Within a group every buffer, barrier and
        // descriptor offset from g0 and every release decision is a constant.
        constexpr int kPassSteps = STAGES * KD;  // steps per pass over the ring
        uint32_t g0 = 0;  // the group's first stage
        auto stage_at = [&](int i) { return g0 + static_cast<uint32_t>((i / KD) % STAGES); };
        auto parity_at = [&](int i) { return ph ^ static_cast<uint32_t>((i / kPassSteps) & 1); };
        // The next group: its first stage (past the ring's end: 0) and parity
        // (flipped by each pass completed: one, or none for a group of two passes).
        struct Group {
          uint32_t g0, ph;
        };
        auto next_group = [&] {
          const bool wrap = kGroupStages >= STAGES || g0 + kGroupStages == STAGES;
          return Group{wrap ? 0u : g0 + kGroupStages, ph ^ static_cast<uint32_t>(wrap && kGroupStages != 2 * STAGES)};
        };
        auto ring_desc = [&](int i) { return desc_at(stage_at(i), i % KD); };
        // After step i's wgmmas are issued: wait for step i - 1's, release its
        // stage if it was the stage's last block (never at the unit's first step;
        // at a group's first, the previous group's last stage).
        auto ring_wait = [&](int i, bool unit_first) {
          const long long t0 = LoopClock::now();
          ptx::wgmma_wait<kGroupsPerStep<MT, kSplitGroups>>();
          if constexpr (kTimeline) clk.wgmma += LoopClock::now() - t0, ++clk.steps;
          if (i % KD == 0 && !unit_first) release(i > 0 ? stage_at(i - 1) : (g0 == 0 ? STAGES : g0) - 1u);
        };
        int left = ke - kb;  // steps of the unit not yet issued
        bool first = true;   // the unit's first group
        // Steps 2P and 2P + 1 of the group (P a constant: an integral_constant,
        // so that no unroller can leave the stage arithmetic to run time);
        // false once the unit's last step is issued (prev: its stage).
        auto ring_pair = [&](auto P) -> bool {
          constexpr int i = 2 * decltype(P)::value;
          issue_stage<BM, MT, kSplitGroups>(acc, a0, ring_desc(i));
          ring_wait(i, i == 0 && first);
          if (--left == 0) return prev = static_cast<int>(stage_at(i)), false;
          load_at(stage_at(i + 1), parity_at(i + 1), (i + 1) % KD, a1);
          if constexpr (ASETS > 1)
            issue_stage<BM, MT, kSplitGroups>(acc_b, a1, ring_desc(i + 1));
          else
            issue_stage<BM, MT, kSplitGroups>(acc, a1, ring_desc(i + 1));
          ring_wait(i + 1, false);
          if (--left == 0) return prev = static_cast<int>(stage_at(i + 1)), false;
          if constexpr (i + 2 < kGroupSteps) {
            load_at(stage_at(i + 2), parity_at(i + 2), (i + 2) % KD, a0);
          } else {
            const Group n = next_group();  // the next group's step 0
            load_at(n.g0, n.ph, 0, a0);
          }
          return true;
        };
        // One group: the pairs in order, stopping after the unit's last step; true when the group ran whole.
        auto ring_group = [&]<int... P>(std::integer_sequence<int, P...>) {
          return (ring_pair(std::integral_constant<int, P>{}) && ...);
        };
        load_at(0, ph, 0, a0);
        if (threadIdx.x == 128) timeline_mark(p, kTlFirstStage);
        if constexpr (kTimeline) clk = LoopClock{}, clk.start = LoopClock::now();
        while (ring_group(std::make_integer_sequence<int, kGroupSteps / 2>{})) {
          const Group n = next_group();
          g0 = n.g0, ph = n.ph;
          first = false;
        }
        it += (ke - kb + KD - 1) / KD;
      } else {
      load(a0);
      if (threadIdx.x == 128) timeline_mark(p, kTlFirstStage);
      // (the unit's split from here: its first wait is the fill's; the last unit's is recorded)
      if constexpr (kTimeline) clk = LoopClock{}, clk.start = LoopClock::now();
      while (true) {
        issue_stage<BM, MT, kSplitGroups>(acc, a0, x_desc());
        next_step();
        if (kt == ke) break;
        load(a1);
        if constexpr (ASETS > 1)
          issue_stage<BM, MT, kSplitGroups>(acc_b, a1, x_desc());
        else
          issue_stage<BM, MT, kSplitGroups>(acc, a1, x_desc());
        next_step();
        if (kt == ke) break;
        load(a0);
      }
      }  // kRing
      }  // kSS
      const long long t_drain = LoopClock::now();
      ptx::wgmma_wait<0>();
      if (threadIdx.x == 128) {
        timeline_mark(p, kTlMainLoopDone);
        if constexpr (kTimeline)
          if (clk.start != 0) {  // (the register-A W4 path)
            const long long t = LoopClock::now();
            timeline_store(p, kTlLoopCycles, t - clk.start);
            timeline_store(p, kTlLoopBarrierCycles, clk.barrier);
            timeline_store(p, kTlLoopWgmmaCycles, clk.wgmma + (t - t_drain));
            timeline_store(p, kTlLoopSteps, clk.steps);
          }
      }
#pragma unroll
      for (int j = 0; j < MT; ++j) ptx::reg_fence(acc[j]);
      if constexpr (ASETS > 1) {
#pragma unroll
        for (int j = 0; j < MT; ++j) {
          ptx::reg_fence(acc_b[j]);
#pragma unroll
          for (int i = 0; i < BM / 2; ++i) acc[j][i] += acc_b[j][i];
        }
      }
      // kPc16W: the rows g + 8 accumulated 16 x; exact from here.
      if constexpr (kPc16W)
#pragma unroll
        for (int j = 0; j < MT; ++j) pc_rows8_exact(acc[j]);
      release(prev);
      if constexpr (kPD) release_a((it - 1) & 1);
      if constexpr (kMC)
        if (n_blk >= p.grid_n) continue;  // the last pair's missing n block: no outputs

      // kPR: this CTA's token groups [row_off, row_off + kEpiRows) of the tile.
      int row_off = 0;
      if constexpr (kUN) {
        // Both warpgroups are done with the stages (as below): the staged
        // epilogue may now write its buffers over them (kBN64: warpgroup 0).
        ptx::named_barrier(1, kAccThreads);
      } else if constexpr (kPR) {
        // Every CTA of the cluster is done with its stages (every stage of
        // the unit was waited for; every value read from them was used, so a
        // relaxed arrival is enough, as in cluster_reduce_leave).
        // (ra: only the wait of the barrier arrived at the start; the
        // stores go to the owners' regions apart from their stages.)
        if (!ra) ptx::cluster_arrive_relaxed();
        ptx::cluster_wait();
        if (threadIdx.x == 128) timeline_mark(p, kTlClusterWaitDone);
        const uint32_t rank = ptx::cluster_ctarank();
        // acc[j][4 (o kOwn + ii) + e] of owner o (a runtime rank) through
        // selects, so that the register indices stay constants.
        auto owner_part = [&](uint32_t o, int j, int ii, int e) {
          int32_t v = acc[j][4 * ((kOwners - 1) * kOwn + ii) + e];
#pragma unroll
          for (int c = kOwners - 2; c >= 0; --c) v = o == static_cast<uint32_t>(c) ? acc[j][4 * (c * kOwn + ii) + e] : v;
          return v;
        };
        // To the owner d ranks on: its groups, into slot kPR - 1 - d there
        // (push_async: stores that complete on the owner's recv_bar).
        const bool pa = p.push_async;
#pragma unroll
        for (int d = 1; d < kPR; ++d) {
          const uint32_t to = kPR == 2 ? rank ^ 1u : (rank + d) % kPR;
          if (kOwners == kPR || to < kOwners) {
            const uint32_t dst = ptx::map_shared_rank(ptx::smem_addr(recv_base), to) + static_cast<uint32_t>(ctid) * 16;
            const uint32_t bar = ptx::map_shared_rank(ptx::smem_addr(recv_bar), to);
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
              for (int ii = 0; ii < kOwn; ++ii) {
                const uint32_t at = dst + static_cast<uint32_t>(((kPR - 1 - d) * MT + j) * kOwn + ii) * kGroupBytes;
                const int32_t x = owner_part(to, j, ii, 0), y = owner_part(to, j, ii, 1), z = owner_part(to, j, ii, 2),
                              w = owner_part(to, j, ii, 3);
                if (pa)
                  ptx::st_async_v4(at, x, y, z, w, bar);
                else
                  ptx::st_shared_cluster_v4(at, x, y, z, w);
              }
          }
        }
        if (!pa) ptx::cluster_sync();  // the parts arrived (release / acquire)
        if (threadIdx.x == 128) timeline_mark(p, kTlPartsDone);  // (a sender: its stores issued)
        if constexpr (kOwners < kPR)
          if (rank >= kOwners) continue;  // a sender only
        if (pa) {  // the kPR - 1 senders' parts, push_recv_bytes in all, arrive on recv_bar
          if (ctid == 0) ptx::mbar_arrive_expect_tx(recv_bar, push_recv_bytes(kShape, kPR));
          ptx::mbar_wait(recv_bar, 0);  // phase 0: a cluster tile's CTA takes one unit
          if (threadIdx.x == 128) timeline_mark(p, kTlPartsDone);
        }
        // Own groups into the low slots, plus the received parts.
        const int4* recv = reinterpret_cast<const int4*>(recv_base) + ctid;
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
          for (int ii = 0; ii < kOwn; ++ii) {
            int32_t sum[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) sum[e] = owner_part(rank, j, ii, e);
#pragma unroll
            for (int slot = 0; slot < kPR - 1; ++slot) {
              const int4 r = recv[((slot * MT + j) * kOwn + ii) * kAccThreads];
              sum[0] += r.x, sum[1] += r.y, sum[2] += r.z, sum[3] += r.w;
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[j][4 * ii + e] = sum[e];
          }
        row_off = static_cast<int>(rank) * kEpiRows;
      } else if constexpr (kCL) {
        // Both warpgroups are done with the stages (every stage of the unit
        // was waited for, so no copy into them is in flight): they now hold
        // the partial tile and the factors (kBN64: warpgroup 0).
        ptx::named_barrier(1, kAccThreads);
        if (threadIdx.x == 128) timeline_mark(p, kTlClusterWaitDone);
        // Distributed shared-memory loads in flight per thread in the sum: 4
        // where 8 would spill (two CTAs per SM; the 256 x 128 accumulators).
        constexpr int kSumLoads = OCC == 2 || BM * MT >= 256 ? 4 : 8;
        cluster_reduce_epilogue<BM, MT, kG128, kTokPerThread, kSumLoads, kBN64>(p, smem, acc, scale, szero, tok_sx,
                                                                                tok_asum, cw, warp, g, q, ctid, m_blk,
                                                                                n_blk);
        continue;
      }

      // ---- epilogue: acc[j][4 i + 2 h + e] = channel o_base[j] + 8 h, token t_base + 8 i + e ----
      const int t_base = m_blk * BM + 2 * q;
      int o_base[MT];
#pragma unroll
      for (int j = 0; j < MT; ++j) o_base[j] = t16[j] * 16 + g;

      // Visits this thread's accumulators of the CTA's rows inside the output
      // (kPR: its groups, in the low slots): f(value, index in [m, n], token).
      auto for_each_output = [&](auto&& f) {
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
          for (int i = 0; i < kEpiRows / 8; ++i)
#pragma unroll
            for (int e4 = 0; e4 < 4; ++e4) {
              const int o = o_base[j] + 8 * (e4 >> 1), t = t_base + row_off + 8 * i + (e4 & 1);
              if (o < p.n && t < p.m) f(acc[j][4 * i + e4], static_cast<size_t>(t) * p.n + o, t);
            }
      };

      if (!kUN && !kPR && un.parts > 1) {
        // Partial pieces, split-K and stream-K alike: [MT][BM / 8][256 threads][4]
        // INT32 in the accumulators' register order, 16-B accesses at constant
        // offsets from one base (a tile's piece is contiguous). Split-K: piece
        // (tile, split) of [grid_n][grid_m][splits]; stream-K: the CTA's own.
        // (Until 2026-12-02 split-K went through an [splits][m][n] array, one
        // bounds-checked 4-byte access per output with its own 64-bit address:
        // the last split's reads of the others' sums came a few at a time,
        // and a tile's fix-up cost more than its share of the main loop.)
        constexpr int kTileInts = 128 * MT * BM;
        auto piece_at = [&](int32_t* piece, int j, int i) {
          return reinterpret_cast<int4*>(piece) + (j * (BM / 8) + i) * 256 + ctid;
        };
        auto split_piece = [&](int z) {
          return p.partials + ((static_cast<size_t>(n_blk) * p.grid_m + m_blk) * p.splits + z) * kTileInts;
        };
        {
          int32_t* mine;
          if constexpr (kSK) mine = stream_k_piece(p, blockIdx.x, stream_k_buf(un, un.slot), kTileInts);
          else mine = split_piece(un.slot);
#pragma unroll
          for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int i = 0; i < BM / 8; ++i)
              __stcg(piece_at(mine, j, i), make_int4(acc[j][4 * i], acc[j][4 * i + 1], acc[j][4 * i + 2],
                                                     acc[j][4 * i + 3]));
        }
        __threadfence();
        ptx::named_barrier(1, 256);
        if (ctid == 0) {
          int* counter = p.counters + n_blk * p.grid_m + m_blk;
          const int arrived = atomicAdd(counter, 1);
          *s_is_last = arrived == un.parts - 1;
          if (arrived == un.parts - 1) *counter = 0;  // reset for the next launch
        }
        ptx::named_barrier(1, 256);
        if (!*s_is_last) continue;
        __threadfence();
        for (int z = 0; z < un.parts; ++z) {
          if (z == un.slot) continue;
          int32_t* other;
          if constexpr (kSK) other = stream_k_piece(p, blockIdx.x - un.slot + z, stream_k_buf(un, z), kTileInts);
          else other = split_piece(z);
#pragma unroll
          for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int i = 0; i < BM / 8; ++i) {
              const int4 v = __ldcg(piece_at(other, j, i));
              acc[j][4 * i] += v.x, acc[j][4 * i + 1] += v.y, acc[j][4 * i + 2] += v.z, acc[j][4 * i + 3] += v.w;
            }
        }
      }

      if (p.acc_out) {  // exact accumulators (tests): plain stores
        for_each_output([&](int32_t& v, size_t idx, int t) { p.acc_out[idx] = kBiasedW ? unbias_acc(v, p.x_sum[t]) : v; });
        continue;
      }

      // No global load from here on (the factors came at the tile's start):
      // y may alias them as far as the compiler knows, so loads between the
      // stores below would each wait a full memory latency. The per-token
      // factors go to this warpgroup's shared arrays [2][BM] (f32), ordered
      // before their reads by the first chunk's barrier.
      float* s_fac = fac + cw * 2 * BM;
#pragma unroll
      for (int r = 0; r < kTokPerThread; ++r)
        if (wtid + 128 * r < BM) {
          s_fac[wtid + 128 * r] = tok_sx[r];
          s_fac[BM + wtid + 128 * r] = tok_asum[r];
        }

      const int o_wg = kBN64 ? n_blk * 64 : (n_blk * MT * 2 + cw * MT) * 64;  // first channel of this warpgroup
      const bool vec_ok = (p.n & 7) == 0 && (reinterpret_cast<uintptr_t>(p.y) & 15) == 0;
      // This thread's fp16 pair of 8 x 8 matrix (i, j, h) (channels x tokens:
      // channel o_base[j] + 8 h, tokens 8 i + 2 q, + 1): low the first token.
      auto pack = [&](int i, int j, int h) -> uint32_t {
        const float sx0 = s_fac[row_off + 8 * i + 2 * q], sx1 = s_fac[row_off + 8 * i + 2 * q + 1];
        const int32_t v0 = acc[j][4 * i + 2 * h], v1 = acc[j][4 * i + 2 * h + 1];
        float f0, f1;
        if constexpr (kBiasedW) {
          f0 = quant::epilogue_g128(unbias_acc(v0, __float_as_int(s_fac[BM + row_off + 8 * i + 2 * q])), sx0, scale[j][h]);
          f1 = quant::epilogue_g128(unbias_acc(v1, __float_as_int(s_fac[BM + row_off + 8 * i + 2 * q + 1])), sx1,
                                    scale[j][h]);
        } else if constexpr (kG128) {
          f0 = quant::epilogue_g128(v0, sx0, scale[j][h]);
          f1 = quant::epilogue_g128(v1, sx1, scale[j][h]);
        } else {
          f0 = quant::epilogue_per_channel(v0, sx0, scale[j][h], szero[j][h], s_fac[BM + row_off + 8 * i + 2 * q]);
          f1 = quant::epilogue_per_channel(v1, sx1, scale[j][h], szero[j][h], s_fac[BM + row_off + 8 * i + 2 * q + 1]);
        }
        const __half2 hv = __floats2half2_rn(f0, f1);
        return *reinterpret_cast<const uint32_t*>(&hv);
      };
      // One stmatrix.x4 of a run of 8-token groups from token group i0: the four
      // matrices 4 x .. 4 x + 3 of the run (matrix mm is (i, j, h) with
      // mm = ((i - i0) * MT + j) * 2 + h), packed by this thread, and stored at
      // addr(h, j, i8) of the matrix this lane addresses (4 x + lane / 8; i8 its
      // token group within the run).
      auto stmatrix_x4 = [&](int i0, int x, auto&& addr) {
        uint32_t pk[4];
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int mm = 4 * x + t;
          pk[t] = pack(i0 + (mm >> 1) / MT, (mm >> 1) % MT, mm & 1);
        }
        const int mm = 4 * x + (lane >> 3);
        ptx::stmatrix_x4_trans(addr(mm & 1, (mm >> 1) % MT, (mm >> 1) / MT), pk[0], pk[1], pk[2], pk[3]);
      };
      // The last two matrices 4 x, 4 x + 1 of a run whose count is not a
      // multiple of four (h = 0, 1 of one (i, j)), by one stmatrix.x2.
      auto stmatrix_x2 = [&](int i0, int x, auto&& addr) {
        const int i8 = (2 * x) / MT, j = (2 * x) % MT;  // matrices 4 x, 4 x + 1: (i0 + i8, j, h = 0 / 1)
        const int h = (lane >> 3) & 1;                  // the matrix this lane addresses (lanes 0-15 count)
        ptx::stmatrix_x2_trans(addr(h, j, i8), pack(i0 + i8, j, 0), pack(i0 + i8, j, 1));
      };
      // Stores 16-B piece v of output row t from channel o (8 channels, fewer at n's end).
      auto store_piece = [&](int t, int o, const uint4& v) {
        __half* dst = p.y + static_cast<size_t>(t) * p.n + o;
        if (vec_ok && o + 8 <= p.n) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else {  // fewer than 8 channels left, or y not 16-B aligned: one by one (a short loop, no call:
                  // a call would save the live accumulators of the later chunks to local memory)
          const int count = min(8, p.n - o);
#pragma unroll 1
          for (int x = 0; x < count; ++x) {
            const uint32_t w = x < 4 ? (x < 2 ? v.x : v.y) : (x < 6 ? v.z : v.w);
            dst[x] = __ushort_as_half(static_cast<unsigned short>(w >> (16 * (x & 1))));
          }
        }
      };

      if constexpr (kTmaEpi) {
        // Per half of the tile's tokens: this warpgroup's fp16 outputs go as
        // 8 x 8 matrices (stmatrix.trans, token rows) into its MT boxes
        // [kRows tokens][64 channels] (128-B rows: 16-B chunk c of row r at
        // c ^ (r % 8), the TMA 128-B swizzle; the 8 rows of one matrix hit
        // distinct banks), then one thread stores each box with TMA, which
        // drops the rows and columns past m and n. The next half (or tile)
        // waits until those stores have read the staging.
        constexpr int kRows = tma_epi_rows(BM), kBox = tma_epi_box_bytes(BM);
        constexpr int kMats = kRows / 8 * MT * 2;  // 8 x 8 matrices per half: (i, j, h)
        static_assert(kMats % 2 == 0, "stmatrix.x4 takes the matrices of a half four at a time, x2 the last two");
        uint8_t* stg = tstage + cw * MT * kBox;
        const uint32_t lane_row = ptx::smem_addr(stg) + (lane & 7) * 128;  // token row lane % 8 of an 8-row group
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          if (wtid == 0) ptx::bulk_wait_read_all();  // the previous stores from this staging have read it
          ptx::named_barrier(2 + cw, 128);           // ... and (first half) s_fac is written
          // box j, rows 8 i8.., swizzled chunk 2 warp + h
          auto staged = [&](int h, int j, int i8) {
            return lane_row + j * kBox + i8 * 8 * 128 + static_cast<uint32_t>((2 * warp + h) ^ (lane & 7)) * 16;
          };
#pragma unroll
          for (int x = 0; x < kMats / 4; ++x) stmatrix_x4(half * kRows / 8, x, staged);
          if constexpr (kMats % 4 != 0) stmatrix_x2(half * kRows / 8, kMats / 4, staged);
          ptx::fence_proxy_async_shared();  // the stmatrix writes before the TMA's reads
          ptx::named_barrier(2 + cw, 128);
          const int t0 = m_blk * BM + half * kRows;
          if (p.y_tma) {
            if (wtid == 0) {
#pragma unroll
              for (int j = 0; j < MT; ++j) ptx::tma_store_2d(&w_map, stg + j * kBox, o_wg + 64 * j, t0);
              ptx::bulk_commit();
            }
          } else {  // y not 16-B aligned or n % 8 != 0: the 16-B pieces of the staging copied out
#pragma unroll
            for (int pc = wtid; pc < kRows * MT * 8; pc += 128) {
              const int row = pc / (MT * 8), j = pc / 8 % MT, c = pc % 8;
              const int t = t0 + row, o = o_wg + 64 * j + 8 * c;
              if (t >= p.m || o >= p.n) continue;
              store_piece(t, o, *reinterpret_cast<const uint4*>(stg + j * kBox + row * 128 + ((c ^ (row & 7)) * 16)));
            }
          }
        }
        continue;
      }

      // Staged stores: per chunk of kChunk tokens, this warpgroup writes its
      // fp16 outputs [kChunk tokens][64 * MT channels] into its shared buffer
      // (rows padded by 16 B: the 8 token rows of one stmatrix hit distinct
      // banks), then copies the rows out with coalesced 16-B stores. The
      // accumulators go in as 8 x 8 matrices (channels x tokens: 8 channels of
      // the warp's 16, 8 tokens), two tokens of one channel per register as an
      // fp16 pair, stored transposed (token rows) by stmatrix: 4 matrices per
      // instruction. This code runs once per tile, straight through (its
      // accumulator indices are constants): it is kept short so that its
      // instruction fetches cost less (round 9's profile: half of the
      // epilogue's stall samples were instruction fetches).
      constexpr int kChunk = epi_chunk(kEpiRows, MT), kWgCh = 64 * MT, kRowBytes = epi_row_bytes(MT);
      constexpr int kMats = kChunk / 8 * MT * 2;  // 8 x 8 matrices per chunk: (i, j, h)
      // (128 x 8 unsplit: a chunk of two matrices, one stmatrix.x2.)
      static_assert((kCL && !kUN && !kPR) || kMats % 4 == 0 || kMats == 2, "stmatrix.x4 takes the matrices of a chunk four at a time");  // (kCL: not reached)
      static_assert((kCL && !kUN && !kPR) || kTmaEpi || kEpiRows % kChunk == 0, "the chunks cover the tile's tokens exactly");
      uint8_t* ebuf = epi + cw * kEpiBufs * kChunk * kRowBytes;
      // This lane's row address in the matrix it addresses (lane / 8 of four),
      // at token row lane % 8 of its 8-token group and channel column
      // warp * 16 of m64 tile j (+ 8 h): the matrix's offsets are added below.
      const uint32_t ebuf_lane = ptx::smem_addr(ebuf) + (lane & 7) * kRowBytes + warp * 32;
#pragma unroll
      for (int c0 = 0; c0 < kEpiRows; c0 += kChunk) {
        // Chunk c0 / kChunk in buffer (c0 / kChunk) % kEpiBufs. Before the
        // first chunk: s_fac written. With one buffer, before every chunk: the
        // previous chunk copied out. (With two, the chunk before the previous,
        // which used this buffer, was copied out by every thread before the
        // previous chunk's second barrier; so was the last chunk of the
        // previous tile before the first chunk of this one.)
        const int buf_off = (c0 / kChunk) % kEpiBufs * kChunk * kRowBytes;
        if (kEpiBufs == 1 || c0 == 0) ptx::named_barrier(2 + cw, 128);
        // This lane's row of matrix (i8, j, h) in the chunk's buffer.
        auto mat_addr = [&](int h, int j, int i8) {
          return ebuf_lane + buf_off + i8 * 8 * kRowBytes + (j * 64 + 8 * h) * 2;
        };
        // Four matrices at a time (one stmatrix), so that only four packed registers live.
#pragma unroll
        for (int x = 0; x < kMats / 4; ++x) stmatrix_x4(c0 / 8, x, mat_addr);
        if constexpr (kMats % 4 != 0) stmatrix_x2(c0 / 8, kMats / 4, mat_addr);
        ptx::named_barrier(2 + cw, 128);
        constexpr int kPieces = kChunk * kWgCh / 8;  // 16-B pieces of the chunk
#pragma unroll
        for (int pc = wtid; pc < kPieces; pc += 128) {
          const int row = pc / (kWgCh / 8), o = o_wg + (pc % (kWgCh / 8)) * 8;
          const int t = m_blk * BM + row_off + c0 + row;
          if (t >= p.m || o >= p.n) continue;
          store_piece(t, o, *reinterpret_cast<const uint4*>(ebuf + buf_off + row * kRowBytes + (o - o_wg) * 2));
        }
      }
    }
    if (threadIdx.x == 128) timeline_mark(p, kTlEnd);
    // The TMA stores must have read their staging before the CTA exits and its
    // shared memory goes (their writes complete with the grid, as CUTLASS's
    // TMA epilogues rely on).
    if constexpr (kTmaEpi)
      if ((threadIdx.x & 127) == 0) ptx::bulk_wait_read_all();
  }
  // kMC: neither CTA exits while the other may still arrive on its barriers.
  if constexpr (kMC) ptx::cluster_sync();
#else
  // Built for another target: never launched there (the planner checks the device).
  (void)x_map;
  (void)w_map;
  (void)p;
#endif
}

}  // namespace qserve::cuda::w4a8::wgmma
