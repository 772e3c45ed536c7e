// The boundary between the W4A8 host code and the sm_90a wgmma kernels
// (gemm_w4a8_wgmma_*.cu): parameters, the tile table, one launch function.
// Design: docs/gemm-hopper.md.
#pragma once

#include <cstdint>
#include <utility>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace qserve::cuda::w4a8::wgmma {

struct Params {
  const uint8_t* w;        // repacked W4 [n/128][k/64][8][32][16 B] (quant/w4a8_repack.h)
  const uint32_t* level2;  // [ceil(n/128)][groups][8][8] (g128; quant/w4a8_repack.h)
  const int8_t* x;         // [m, k] row-major (read through the tensor map; kept for checks)
  const __half* s_x;       // [m]
  const __half* a_sum;     // [m] (per-channel)
  const int32_t* x_sum;    // [m] sum_i Xq[t, i] (g128: the W4 tiles' biased weights, unbias_acc)
  const float* ch_scale;   // [n16*16]
  const float* ch_szero;   // [n16*16] (per-channel)
  __half* y;               // [m, n]
  int32_t* acc_out;        // [m, n] or null: exact accumulators instead of y
  int* counters;           // [grid_m * grid_n] split-K arrival counters (zero between launches)
  int32_t* partials;       // split-K: [splits][m][n] partial sums; stream-K: [ctas][2][BN * BM] pieces
  int m, n, k, n16, groups;
  int blocks128;           // ceil(n / 128): 128-channel blocks in the repacked weights
  int grid_n, grid_m, splits, kt_per_split;  // kt in 128-wide k stages
  int units;               // grid_n * grid_m * splits work units (a persistent CTA loops over them);
                           // multicast pairs: ceil(grid_n / 2) * grid_m * splits (a cluster loops over them)
  // Stream-K (tiles is_stream_k_tile): the k stages of all tiles cut
  // into one equal range per CTA (kernels/gemm_w4a8_wgmma_units.cuh);
  // splits, kt_per_split and units are then unused.
  int stream_k;
  // tma_epilogue tiles: 1 when the kernel's second tensor map is y's
  // (launch_kernel: y 16-B aligned, n % 8 == 0), so the epilogue stores
  // through TMA; 0: the kernel copies its staged outputs out itself.
  int y_tma;
  // INT8-weight tiles (TileShape::s8): the weights come through a second
  // tensor map (INT8 [n, k] row-major). Set when another kernel of the same
  // stream writes them (the g128 dequantization pass): the producer then
  // waits for the previous kernel before its first weight copy.
  int w_after_wait;
  // Deep-stage tiles (TileShape::kd > 1): 1 when x_map is the 3-D view of X
  // [k/128 blocks][m][128 B] (launch_kernel: QSERVE_W4A8_X_3D, k % 128 == 0),
  // so that a stage's kd activation blocks come in one copy instead of kd.
  int x_3d;
  // The register-A W4 tiles with two issuing threads and one CTA per SM
  // (the two-per-SM tiles ignore it): > 0 when the weights
  // of only the first `first_stages` stages are requested at the CTA's
  // start, the others once stage 0 is complete (launch_kernel:
  // QSERVE_W4A8_FIRST_STAGES); 0: every stage's weights at the start.
  int first_stages;
  // Push forms (kPR) of tiles where push_recv_apart: 1 when the received
  // parts go to their own region (launch_push_form: QSERVE_W4A8_PUSH_APART,
  // gemm_w4a8_switches.h; the launch then sizes the shared memory for it).
  int push_recv_apart;
  // Push forms (kPR): 1 when the parts go by st.async, each completing on the
  // owner's mbarrier (the owner waits there), instead of distributed
  // shared-memory stores published by a cluster barrier with release /
  // acquire, whose release compiles to MEMBAR.ALL.GPU (launch_push_form:
  // QSERVE_W4A8_PUSH_ASYNC, gemm_w4a8_switches.h).
  int push_async;
#ifdef QSERVE_GEMM_TIMELINE
  // The phases' timestamps [kW4A8TimelineCtas][kW4A8TimelinePoints]
  // (gemm_w4a8_timeline.h), or null: not recording. Only in a build
  // configured for it, so that the other builds' kernels stay as they are.
  uint64_t* timeline;
#endif
};

// CTA tile: BN = 128 * MT output channels (two consumer warpgroups of 64 * MT
// channels each; bn64: 64, one warpgroup's) x BM tokens (the wgmma N) x 128
// input channels per stage.
struct TileShape {
  int bm;      // tokens per CTA tile = wgmma N (8..256)
  int mt;      // m64 wgmma tiles per consumer warpgroup (1 or 2): BN = 128 * mt (bn64: 64)
  int stages;  // TMA pipeline depth
  int acc_sets = 1;  // accumulator sets the consumers alternate between per stage (1 or 2)
  bool s8 = false;   // INT8 weights [n, k] through TMA, both wgmma operands in shared memory
  // W4 weights dequantized by the producer into INT8 tiles (consumers as s8):
  // the stages hold X and the W4 staging, the INT8 tiles two slots of their own.
  bool pd = false;
  // Split-K across the CTAs of a thread block cluster (W4 tiles): the grid is
  // one CTA per work unit (not persistent), the `splits` CTAs of one output
  // tile form a cluster and sum their partial tiles through distributed
  // shared memory, each CTA reducing and storing a slice of the tile: no
  // INT32 partials in global memory, no counters.
  bool cluster = false;
  // Deep stages: kd consecutive 128-wide k blocks per pipeline stage (W4
  // tiles; with k % 128 == 64 the last block is a half, as with kd = 1). A
  // 128-channel block's weights for the kd blocks are
  // contiguous in the repacked layout, so a stage takes one weight copy of
  // kd x 8 KB per block (and one of the level-2 words) instead of kd of each:
  // fewer, larger copies (a copy under 16 KB costs a fixed ~140 ns in the TMA
  // unit: bench/results/2026-11-30-stream-h200.md). The activations still
  // come in one [bm][128 B] box per block (one 3-D box per stage measured the
  // same: bench/results/2026-11-30-gemm-h200-r8.md).
  int kd = 1;
  // Multicast pair (persistent W4 tiles): a cluster of two CTAs computes two
  // neighbouring channel blocks (n blocks 2 j, 2 j + 1) of the same token
  // block and k range, unit by unit in step; each CTA loads half of a
  // stage's activation rows and multicasts it into both, so a stage's X
  // crosses from L2 once per pair (the activations are most of a stage's
  // bytes at 128 channels: 32 KB of X against 8 KB of W4 on 128 x 256).
  // A stage slot is free once the consumers of both CTAs have released it
  // (each consumer warp arrives on both CTAs' `empty` barriers).
  bool mc = false;
  // CTAs per SM (1 or 2). Two (round 22, the small cluster tiles): 80
  // registers a thread at launch, the producer down to 24 and the consumers
  // up to 104 through setmaxnreg (a 16-token tile's accumulators and two
  // register sets of weights fit), at most kSmemLimitOcc2 of shared memory:
  // twice the consumer warps per SM and twice the resident CTAs for the same
  // splits (bench/results/2026-12-02-gemm-h200-r22.md).
  int occ = 1;
  // Whether the stages carry the level-2 words (W4 tiles of g128). The tile
  // table leaves it on; kind_shape turns it off for per-channel kernels,
  // which never read the words: their stages are mt * 256 bytes per block
  // smaller, which is what lets some push forms hold their received parts
  // apart at full depth (docs/gemm-hopper.md, "Per-channel stages without
  // the level-2 words").
  bool level2 = true;
  // 64 output channels per CTA (cluster tiles of mt = 1; docs/gemm-hopper.md,
  // "The 64-channel cluster tiles"): consumer warpgroup 0 computes them,
  // warpgroup 1 takes part in the cluster barriers only. The channel block
  // n_blk of 64 is the 16-channel tiles 4 (n_blk % 2) .. + 3 of the
  // repacked layout's 128-channel block n_blk / 2: the producer copies those
  // 2 KB of each 4-KB k64 half (and g128 the block's level-2 words) into the
  // stage where a 128-channel CTA would have them, so that the stage layout
  // (and its size) and the consumer's shared-memory offsets stay those of mt = 1.
  bool bn64 = false;
  constexpr int bn() const { return bn64 ? 64 : 128 * mt; }
  // Bytes of one 128-wide k block's weights (a stage holds kd blocks): W4
  // repacked (8 KB per 128 channels x 128 k) or INT8 (16 KB per 128 channels
  // x 128 k, 128-B swizzled rows); pd: the W4 staging, and apart from the
  // stages two INT8 tile slots.
  constexpr int w_stage_bytes() const { return mt * (s8 ? 16384 : 8192); }
  // W4 tiles (register-A): one block's g128 level-2 words (s2, scaled zero)
  // of the CTA's 8 mt 16-channel tiles, [8 mt][8] uint32, copied with the
  // weights (g128 only: level2).
  constexpr int l2_stage_bytes() const { return s8 || pd || !level2 ? 0 : mt * 256; }
  // One pipeline stage (kd blocks): activations, weights, level-2 words.
  constexpr int stage_bytes() const { return kd * (bm * 128 + w_stage_bytes() + l2_stage_bytes()); }
  constexpr int a_slot_bytes() const { return pd ? 2 * mt * 16384 : 0; }
};

// Indices are the planner's tile ids minus kFirstTile (gemm_w4a8.h).
inline constexpr int kTileCount = 46;
inline constexpr int kFirstS8Tile = 10;       // tiles 10..13: INT8 weights (s8)
inline constexpr int kFirstPdTile = 14;       // tiles 14..16: W4 dequantized by the producer (pd)
// Tiles 17..40: W4, split-K within a cluster (25..37 and 39..40: deep
// stages; 38..40: 64 channels, TileShape::bn64).
inline constexpr int kFirstClusterTile = 17;
inline constexpr int kFirstBn64Tile = 38;
inline constexpr int kEndClusterTile = 41;
// Tiles 41..44: the persistent W4 tiles of 128 channels x 160 / 192 / 208 /
// 224 tokens, between 128 x 128 and 128 x 256 (fewer partial waves at mid m).
inline constexpr int kFirstMidTile = 41, kEndMidTile = 45;
// Tile 45: the multicast pair (TileShape::mc) of 128 x 256 (those of 128 x
// 128, 128 x 208 and 256 x 128 measured 3-21% slower than their single tiles
// at m = 256-4096: bench/results/2026-11-30-gemm-h200-r12.md; 128 x 128 again
// with split-K at m = 128-512 in round 25: 0.97-1.10x its single tile's time,
// bench/results/2026-12-03-gemm-h200-r25.md).
inline constexpr int kFirstMcTile = 45;
inline constexpr int kMaxClusterSplits = 8;   // the portable cluster size
// The cluster tiles' main loop unrolled over groups of the ring of stages
// (kernels/gemm_w4a8_wgmma_kernel.cuh, kRing): a group is the fewest whole
// stages (G, dividing STAGES) of at least kMinRingGroupSteps 128-wide steps,
// an even count (the two register sets alternate); where no divisor gives one,
// two passes over the ring (2 STAGES). Longer groups than kMaxRingGroupSteps keep
// the loop rolled (the 18-step group of the two-CTA-per-SM 128 x 16 push
// form spilled; the whole-ring form's 20-24 steps cost the engine 1-2.5%
// against 4-10% faster GEMMs in isolation, round 47).
inline constexpr int kMinRingGroupSteps = 4, kMaxRingGroupSteps = 12;
constexpr int ring_group_stages(int stages, int kd) {
  for (int g = 1; g <= stages; ++g)
    if (stages % g == 0 && g * kd % 2 == 0 && g * kd >= kMinRingGroupSteps) return g;
  return stages * kd % 2 == 0 ? stages : 2 * stages;
}
// The tiles' groups (stages x kd -> steps a group): 12 x 1 -> 4, 9 x 2 -> 6,
// 10 x 1 -> 10, 5 x 2 -> 10, 4 x 2 -> 4; 11 x 1 -> 22 (two passes: rolled).
static_assert(ring_group_stages(12, 1) == 4 && ring_group_stages(9, 2) == 3 && ring_group_stages(10, 1) == 10 &&
              ring_group_stages(5, 2) == 5 && ring_group_stages(4, 2) == 2 && ring_group_stages(11, 1) == 22);
// Every persistent W4 tile below the INT8-weight ones (0..9) also has a
// stream-K instantiation (Params::stream_k): the large tiles 4..6 (256 x 128,
// 128 x 256, 128 x 128; gemm_w4a8_wgmma_sk_*.cu) and the decode tiles 0..3
// and 7..9 (256 x 8 .. 256 x 64 and the two-accumulator forms;
// gemm_w4a8_wgmma_skd_*.cu): at decode a wide layer has fewer 256-channel
// tiles than SMs (Llama-2-7B gate_up: 86 on 132), and stream-K spreads the
// same weights over every SM. Measured slower than the shipped plans on every
// decode row (round 22: the cut tiles' fix-up costs more than the idle SMs),
// so only forced plans and QSERVE_W4A8_PLANS reach the decode tiles' form.
inline constexpr int kFirstStreamKTile = 0, kEndStreamKTile = kFirstS8Tile;
inline constexpr int kFirstLargeStreamKTile = 4, kEndLargeStreamKTile = 7;
inline constexpr bool is_stream_k_tile(int tile) { return tile >= kFirstStreamKTile && tile < kEndStreamKTile; }
// The tile table (TileShape::level2 on: the layout of the g128 kernels; the
// per-channel kernels lay out kind_shape(tile, false)).
inline constexpr TileShape kTiles[kTileCount] = {
    {8, 2, 12},    // decode
    {16, 2, 11},
    {32, 2, 10},
    {64, 2, 8},
    {128, 2, 6},   // 256 x 128: large m, least L2 traffic per MAC (W is 4-bit)
    // 128 x 256 stores through TMA (tma_epilogue) and gave up a stage for its
    // staging (one stage fewer measured the same:
    // bench/results/2026-11-30-gemm-h200-r10.md, rounds 7 and 9).
    {256, 1, 4},   // 128 x 256
    {128, 1, 8},   // 128 x 128: more CTAs for mid-size problems
    {8, 2, 12, 2},  // the decode tiles with two accumulator sets (the chain of
    {16, 2, 11, 2}, // dependent wgmmas through the accumulators halved)
    {32, 2, 10, 2},
    // INT8 weights (a dequantized g128 / per-channel copy, or W8A8): the
    // consumers only issue wgmmas (no shared loads or unpacking); a stage
    // moves twice the weight bytes, hence fewer stages.
    {128, 2, 4, 1, true},  // 256 x 128
    {256, 1, 4, 1, true},  // 128 x 256
    {128, 1, 6, 1, true},  // 128 x 128
    {64, 2, 5, 1, true},   // 256 x 64
    // W4 weights dequantized by the producer warpgroup into INT8 tiles (the
    // s8 consumers without the pass); a stage holds the X tile and the W4
    // staging, the INT8 tiles have two slots apart.
    {128, 2, 4, 1, false, true},  // 256 x 128
    {256, 1, 4, 1, false, true},  // 128 x 256
    {128, 1, 7, 1, false, true},  // 128 x 128
    // W4 weights, split-K within a cluster (small and mid m: more CTAs per
    // layer without the global fix-up's INT32 round trip).
    // Deep stages (no staged-epilogue buffers here): the weights of a
    // split's stages stream in before the dependency wait (PDL) while the
    // previous kernel runs. (256 x 32, 256 x 64 and 128 x 64 would hold one
    // more stage each: 11, 9, 13; not measured.)
    {8, 2, 12, 2, false, false, true},   // 256 x 8, two accumulator sets
    {16, 2, 12, 2, false, false, true},  // 256 x 16, two accumulator sets
    {32, 2, 10, 1, false, false, true},  // 256 x 32
    {64, 2, 8, 1, false, false, true},   // 256 x 64
    {128, 2, 6, 1, false, false, true},  // 256 x 128
    {64, 1, 12, 1, false, false, true},  // 128 x 64
    // 128 channels per CTA at decode: per stage half the unpacking of the
    // 256-wide tiles, twice the CTAs for the same splits.
    {8, 1, 20, 2, false, false, true},   // 128 x 8
    // 128 x 16, two CTAs per SM (10 stages; the one-CTA form of 20 stages
    // was in no plan): per-channel Llama qkv / down at m = 9-16 on 192 CTAs,
    // 5-13% less time than the earlier plans after a neighbor kernel (round 22).
    {16, 1, 10, 2, false, false, true, 1, false, 2},
    // The decode cluster tiles with deep stages (kd = 2 or 4 blocks of 128 k
    // per stage: 16-32 KB weight copies per 128 channels).
    {8, 1, 12, 2, false, false, true, 2},   // 128 x 8, 256-deep stages
    {8, 1, 6, 2, false, false, true, 4},    // 128 x 8, 512-deep
    {16, 1, 11, 2, false, false, true, 2},  // 128 x 16, 256-deep
    {16, 1, 5, 2, false, false, true, 4},   // 128 x 16, 512-deep
    {8, 2, 6, 2, false, false, true, 2},    // 256 x 8, 256-deep
    {16, 2, 6, 2, false, false, true, 2},   // 256 x 16, 256-deep
    {32, 2, 5, 1, false, false, true, 2},   // 256 x 32, 256-deep
    {64, 1, 6, 1, false, false, true, 2},   // 128 x 64, 256-deep
    {64, 2, 4, 1, false, false, true, 2},   // 256 x 64, 256-deep
    // 128 x 32 (round 23): the token count between the 128 x 16 and 128 x 64
    // cluster tiles, which the table takes at m = 9-16 and 33-64 on several
    // layers, where m = 17-32 had only 256-channel tiles (half the CTAs for
    // the same splits, twice the unpacking per consumer and stage).
    {32, 1, 9, 1, false, false, true, 2},   // 128 x 32, 256-deep
    {32, 1, 4, 1, false, false, true, 4},   // 128 x 32, 512-deep
    {32, 1, 4, 1, false, false, true, 2, false, 2},  // 128 x 32, 256-deep, two CTAs per SM
    // 128 x 128, 256-deep (round 25): m = 256 on the 4096-row layers, where
    // 128 x 128 with global split-K 2 (128 CTAs) pays a 64-KB INT32 piece
    // through global memory per tile; here the split's partial tile is
    // summed over the cluster (distributed shared memory).
    {128, 1, 4, 1, false, false, true, 2},
    // 64 channels x 64 / 32 tokens (bn64): the 128 x 64, 128 x 64 256-deep
    // and 128 x 32 256-deep cluster tiles with half the channels per CTA, for
    // twice the CTAs at m = 32-64 without more k splits (docs/gemm-hopper.md,
    // "The 64-channel cluster tiles"). Their stages are those of the 128 x
    // tiles (half of each weight region unused).
    {64, 1, 12, 1, false, false, true, 1, false, 1, true, true},  // 64 x 64
    {32, 1, 9, 1, false, false, true, 2, false, 1, true, true},   // 64 x 32, 256-deep
    {64, 1, 6, 1, false, false, true, 2, false, 1, true, true},   // 64 x 64, 256-deep
    // Token tiles between 128 and 256 (persistent, one CTA per SM): with
    // 132 SMs the output tiles of a layer at mid m often make a partial last
    // wave on both 128 x 128 and 128 x 256 (Llama-3-8B qkv at m = 1024: 384
    // tiles of 128 x 128 are 2.9 waves, 192 of 128 x 256 are 1.45), where
    // 240 tiles of 128 x 208 make 1.8 waves of a cheaper tile. The planner
    // picks by waves x tile time (gemm_w4a8_wgmma.cpp). Stages: as many as
    // the shared memory holds next to the epilogue's staging (TMA stores
    // from 192 tokens: tma_epilogue).
    {160, 1, 7},  // 128 x 160
    {192, 1, 6},  // 128 x 192
    {208, 1, 5},  // 128 x 208
    {224, 1, 5},  // 128 x 224
    // The multicast pair of 128 x 256 (mc): the same stages, the activations
    // of a stage loaded half by each CTA of a 2-CTA cluster.
    {256, 1, 4, 1, false, false, false, 1, true},
};
// warpgroup 0: TMA producer; 1, 2: consumers (bn64 tiles: warpgroup 2 idle,
// in the cluster barriers only, keeping its launch registers, 168 a thread)
inline constexpr int kThreads = 384;

// The staged epilogue (kernels/gemm_w4a8_wgmma_kernel.cuh): each consumer
// warpgroup stages [epi_chunk(bm, mt) tokens][64 mt channels] fp16 outputs in
// `bufs` shared buffers (chunk i in buffer i % bufs) with rows padded by
// 16 B, then stores 16-B pieces; after the buffers, the per-token factors
// [2 warpgroups][s_x, a_sum][bm] f32. Two buffers where the shared memory
// holds them (epi_buffers): a chunk's stmatrix then waits for no other
// thread's copy-out of the previous chunk, one barrier per chunk instead of two.
inline constexpr int kSmemLimit = 227 * 1024;
// Two CTAs per SM (TileShape::occ): 228 KB per SM less 1 KB reserved per CTA.
inline constexpr int kSmemLimitOcc2 = 113 * 1024;
inline constexpr int smem_limit(int occ) { return occ == 1 ? kSmemLimit : kSmemLimitOcc2; }
// (16 tokens for the 256 x 128 tiles, so that their two buffers fit.)
inline constexpr int epi_chunk(int bm, int mt) { return bm < 32 ? bm : mt == 2 && bm >= 128 ? 16 : 32; }
inline constexpr int epi_row_bytes(int mt) { return mt * 128 + 16; }
inline constexpr int epi_staging_bytes(int bm, int mt, int bufs) {
  return 2 * bufs * epi_chunk(bm, mt) * epi_row_bytes(mt);
}
inline constexpr int epi_bytes(const TileShape& s, int bufs) {
  return epi_staging_bytes(s.bm, s.mt, bufs) + 2 * 2 * s.bm * 4;
}

// The W4 tiles of 128 channels and 192 tokens or more (128 x 256, 128 x
// 192 / 208 / 224) store their outputs through TMA instead
// (kernels/gemm_w4a8_wgmma_kernel.cuh): each consumer warpgroup
// stages half of its tile's tokens at a time, [bm / 2 tokens][64 channels]
// fp16 per m64 tile, 128-B rows in the TMA 128-B swizzle (so that the token
// rows of one stmatrix hit distinct banks), and one thread stores each box
// with cp.async.bulk.tensor: no copy-out loop, two barriers per half.
// Needs y 16-B aligned and n % 8 == 0 (the tensor map's row pitch); else the
// kernel copies the staged halves out itself (Params::y_tma = 0). Measured
// (round 9 of the r10 results, interleaved A/B): 128 x 256 2-4% faster on
// the Llama-3-8B layers at m = 1024 / 4096; the 128 x 128 and 256 x 128
// tiles no faster (0.97-1.04), so they keep the chunked epilogue. Tiles
// 35-37 (round 7 of the r11 results, old / new / old / new, every m of
// 768-1536 on four layers): 2.0-3.0% faster (128 x 208 at 5 stages instead
// of 6: its staging takes a stage's room); 128 x 160 measured the same
// (0.9996) and spilled, so it keeps the chunked epilogue. A half of 26
// matrices (208 tokens) ends with one stmatrix.x2.
inline constexpr bool tma_epilogue(const TileShape& s) { return s.bm >= 192 && s.mt == 1 && !s.s8 && !s.pd && !s.cluster; }
inline constexpr int tma_epi_rows(int bm) { return bm / 2; }  // tokens per staged half
inline constexpr int tma_epi_box_bytes(int bm) { return tma_epi_rows(bm) * 128; }
// Both warpgroups' staging, 1024-B aligned (+1 KB of padding), then the per-token factors.
inline constexpr int tma_epi_bytes(const TileShape& s) {
  return 1024 + 2 * s.mt * tma_epi_box_bytes(s.bm) + 2 * 2 * s.bm * 4;
}

// The shape whose shared memory a kind's kernels lay out: per-channel (g128
// false) without the level-2 words' region in its stages.
inline constexpr TileShape kind_shape(const TileShape& s, bool g128) {
  TileShape k = s;
  k.level2 = g128;
  return k;
}

// Shared memory of one CTA (+1 KB for the 1024-B alignment of the swizzled tiles):
// stages (X, weights, level-2 words), mbarriers and the split-K flag, the
// epilogue buffers (not for the cluster tiles: their epilogue runs in the stages).
inline constexpr int smem_bytes_with(const TileShape& s, int epi_bufs) {
  return s.stages * s.stage_bytes() + s.a_slot_bytes() + (2 * s.stages + (s.pd ? 4 : 0)) * 8 + 16 +
         (s.cluster ? 0 : tma_epilogue(s) ? tma_epi_bytes(s) : epi_bytes(s, epi_bufs)) + 1024;
}
inline constexpr int epi_buffers(const TileShape& s) { return smem_bytes_with(s, 2) <= smem_limit(s.occ) ? 2 : 1; }
inline constexpr int smem_bytes(const TileShape& s) { return smem_bytes_with(s, epi_buffers(s)); }
static_assert([] {
  for (const TileShape& s : kTiles)
    if (smem_bytes(s) > smem_limit(s.occ) || s.occ < 1 || s.occ > 2 || (s.occ == 2 && s.pd)) return false;
  return true;
}());

// Cluster tiles: after the main loop the stages hold this CTA's partial tile
// [bm tokens][cluster_row_ints(bn)] int32 (rows padded by 16 B: the
// accumulator stores of one warp hit distinct banks), then the epilogue's
// factors: channel scales and scaled zeros [2][bn] f32, per-token s_x and
// a_sum [2][bm] f32 (bn = 128 mt, or 64: TileShape::bn64).
inline constexpr int cluster_row_ints(int bn) { return bn + 4; }
inline constexpr int cluster_partial_bytes(const TileShape& s) { return s.bm * cluster_row_ints(s.bn()) * 4; }
inline constexpr int cluster_reduce_bytes(const TileShape& s) {
  return cluster_partial_bytes(s) + (2 * s.bn() + 2 * s.bm) * 4;
}
// The 64-channel tiles (bn64): cluster tiles of one m64 tile a warpgroup and
// one CTA per SM, with register-A W4 weights.
static_assert([] {
  for (const TileShape& s : kTiles)
    if (s.bn64 && (!s.cluster || s.mt != 1 || s.s8 || s.pd || s.mc || s.occ != 1)) return false;
  for (int t = 0; t < kTileCount; ++t)
    if (kTiles[t].bn64 != (t >= kFirstBn64Tile && t < kEndClusterTile)) return false;
  return true;
}());
static_assert([] {
  for (const TileShape& s : kTiles)
    if (s.cluster && cluster_reduce_bytes(s) > s.stages * s.kd * (s.bm * 128 + s.w_stage_bytes())) return false;
  return true;
}());
// A cluster tile launched unsplit (p.splits == 1) runs its twin
// (kernels/gemm_w4a8_wgmma_kernel.cuh, kUN): the staged epilogue of the other
// tiles, two buffers and the per-token factors, in the stages.
static_assert([] {
  for (const TileShape& t : kTiles)
    for (const bool g128 : {true, false})
      if (const TileShape s = kind_shape(t, g128); s.cluster && epi_bytes(s, 2) > s.stages * s.stage_bytes())
        return false;
  return true;
}());
// The push forms of a cluster tile (bm a multiple of 16; the kernel's kPR =
// the cluster's size `ways`): the tile's bm / 8 token groups (8 tokens: 16 B
// of a consumer thread's accumulators) are owned by the first ranks,
// push_own_groups each (a power of two, so the owners split the tile
// exactly; ranks past the owners only send); every other rank stores its
// partial of an owner's groups into that owner's stages, slot d - 1 for the
// sender d ranks after it: [ways - 1][mt][own groups][256 threads][16 B]
// (bn64: [ways - 1][own groups][128 threads][16 B], warpgroup 0's: bn x 8
// tokens x 4 B a group either way);
// then the staged epilogue of the owner's 8 x own-groups rows (two buffers,
// the factors of all bm tokens). ways = 2 is the pair form (each CTA owns
// a half).
inline constexpr bool has_pair_form(const TileShape& s) { return s.cluster && s.bm % 16 == 0; }
inline constexpr int push_own_groups(int bm, int ways) {
  const int groups = bm / 8, least = (groups + ways - 1) / ways;
  int own = 1;
  while (own < least) own *= 2;
  return own;
}
inline constexpr int push_recv_bytes(const TileShape& s, int ways) {
  return (ways - 1) * push_own_groups(s.bm, ways) * 8 * s.bn() * 4;
}
inline constexpr int pair_recv_bytes(const TileShape& s) { return push_recv_bytes(s, 2); }
// Where the shared memory holds them beside the stages, the received parts
// get a region of their own past the stages' barriers (128-B aligned; +128
// for that alignment): a sender then stores into it as soon as its main loop
// is done, without the cluster barrier that otherwise waits for every CTA to
// be done with its stages (one barrier of two: the push form's fixed cost at
// decode and small m). Else the parts go into the owner's stages, as above.
inline constexpr bool push_recv_apart(const TileShape& s, int ways) {
  return smem_bytes(s) + push_recv_bytes(s, ways) + 128 <= smem_limit(s.occ);
}
inline constexpr int push_smem_bytes(const TileShape& s, int ways) {
  return smem_bytes(s) + (push_recv_apart(s, ways) ? push_recv_bytes(s, ways) + 128 : 0);
}
// Whether the tile has a push form of `ways` splits: at least half of the
// ranks own token groups (16 tokens at 6 splits, two owners taking five
// parts each, ran 1.02-1.06x the time of the cluster reduction on the H200,
// round 32), and it fits in the stages: the received parts, then the staged
// epilogue of the owned rows and the factors.
inline constexpr bool has_push_form(const TileShape& s, int ways) {
  return has_pair_form(s) && ways >= 2 && ways <= 8 && 2 * (s.bm / 8 / push_own_groups(s.bm, ways)) >= ways &&
         push_recv_bytes(s, ways) + epi_staging_bytes(8 * push_own_groups(s.bm, ways), s.mt, 2) + 2 * 2 * s.bm * 4 <=
             s.stages * s.stage_bytes();
}
// A push form of 3 or more splits whose received parts do not fit beside the
// stages, with one stage fewer so that they do (round 40): the apart form then
// sends its parts as soon as its main loop ends, where the in-stage form waits
// for every CTA of the cluster to be done with its stages; the price is a
// shallower pipeline. Where the tile has such a form (at least 3 stages left,
// the parts apart, the owner's epilogue in the stages: has_push_form), it runs instead
// (QSERVE_W4A8_PUSH_FEWER_STAGES, default on; an instantiation of its own,
// STAGES - 1). Measured on an H100 (bench/results/2026-12-06-gemm-h100-r40.md,
// A B B A): every 3 / 4 / 6-split plan with the form 2.8-12.8% faster (Llama-2-7B
// down per-channel m = 32 wg256x32c/6 10.6 -> 9.2 us); at 2 splits (half a
// tile's parts, a short wait) -1.1% to +1.4%, and wg128x128c-k256/2 at m = 256
// 4.6-11.7% slower (4 -> 3 stages of 256 k): the pair keeps its stages.
inline constexpr TileShape one_stage_fewer(const TileShape& s) {
  TileShape f = s;
  f.stages = s.stages - 1;
  return f;
}
inline constexpr bool has_push_fewer_form(const TileShape& s, int ways) {
  if (ways < 3 || !has_push_form(s, ways) || push_recv_apart(s, ways) || s.stages < 4) return false;
  const TileShape f = one_stage_fewer(s);
  return push_recv_apart(f, ways) && has_push_form(f, ways);
}
// The split counts with push-form instantiations besides 2 (the pair), on the
// tiles that have them (has_push_form: all 16 at 3 and 4; at 6 not those of
// 16 tokens, nor 256 x 128, whose parts would not fit).
using PushWays = std::integer_sequence<int, 3, 4, 6>;
static_assert([] {
  for (const TileShape& t : kTiles)
    for (const bool g128 : {true, false})
      if (const TileShape s = kind_shape(t, g128);
          has_pair_form(s) && (pair_recv_bytes(s) != s.bn() * s.bm * 2 || !has_push_form(s, 2)))
        return false;  // the pair: half a tile, always fits
  return true;
}());
// Multicast pairs: persistent W4 tiles of 128-wide stages, each CTA's half of
// the token rows a whole number of 8-row swizzle atoms.
static_assert([] {
  for (const TileShape& s : kTiles)
    if (s.mc && (s.s8 || s.pd || s.cluster || s.kd != 1 || s.bm % 16 != 0)) return false;
  return true;
}());
// Deep stages: W4 tiles only (the INT8-weight and pd kernels keep 128-wide stages).
static_assert([] {
  for (const TileShape& s : kTiles)
    if (s.kd != 1 && (s.kd < 1 || s.s8 || s.pd)) return false;
  return true;
}());

// The kernel-form switches (gemm_w4a8_switches.h: their defaults, the
// environment variables and the run-time setting; defined there):
// unsplit_twins: a cluster tile launched with p.splits == 1 runs its unsplit
// twin, not the cluster kernel as a cluster of one.
bool unsplit_twins();
// cluster_pair: a cluster plan of two splits on a tile with a pair form runs
// it (docs/gemm-hopper.md "The pair form"), not the cluster reduction.
bool cluster_pair();
// cluster_push: a cluster plan of 3, 4 or 6 splits on a tile with a push form
// runs it, not the cluster reduction.
bool cluster_push();
// push_apart: a push form (the pair included) whose received parts fit beside
// the stages (push_recv_apart) takes them in a region of their own, with one
// cluster barrier fewer.
bool push_apart();
// push_async: the push forms (the pair included) send their parts by
// st.async onto the owner's mbarrier (Params::push_async), with one cluster
// barrier and no fence instead of two barriers, the second a release.
bool push_async();
// push_fewer_stages: a push form of 3 or more splits whose parts do not fit
// beside the stages runs its one-stage-fewer form with the parts apart
// (has_push_fewer_form), where push_apart is on too.
bool push_fewer_stages();
// x_3d: the deep-stage tiles (kd > 1) take a stage's activation blocks in one
// 3-D box (Params::x_3d) where k % 128 == 0, not one 2-D box per block: a
// copy under 16 KB costs the TMA unit ~140 ns whatever its size, and at m =
// 32-64 the activations are as many copies as the weights (round 41). Round
// 42 (H100, A B B A): no effect (median 1.000), so default off.
bool x_3d();
// first_stages: the deep-stage (kd > 1) register-A W4 tiles request the
// weights of their first kFirstStagesAhead stages at the start and the others
// once stage 0 is complete (Params::first_stages), not every stage's at the
// start: at m = 16-64 the first stage's weights waited 0.2-1.5 us in DRAM's
// queue behind every CTA's prefetch (round 41's timeline, hot against cold
// weights). Round 42 (H100, A B B A): the kd = 2 tiles 1-6% faster on most
// rows, the kd = 1 tiles up to 8% slower (their later stages then come too
// late for the main loop), so the launch gives it to the kd > 1 tiles only;
// of 4, 6, 8 and 12 blocks ahead, 8 (4 stages of kd = 2) was the best depth;
// 2 stages above 64 tokens made the m = 128 GEMMs 1-4.5% faster but the
// engine at 128 sequences 0.6-1.1% slower (bench/results/2026-12-06-gemm-h100-r42.md).
bool first_stages();
inline constexpr int kFirstStagesAhead = 4;
// Params::first_stages for a tile of `kd`-block stages: kFirstStagesAhead
// where first_stages() and kd > 1, else 0 (every stage at the start). For
// tuning the depth, QSERVE_W4A8_FIRST_BLOCKS_AHEAD=N (128-wide k blocks,
// 0..64; read once; not a switch: the benchmark's, not the engine's) gives
// every tile that reads it N / kd stages instead (at least 1; 0: none),
// whatever first_stages() says.
int first_stages_ahead(int kd);

// Launches tile `tile` (index into kTiles: a W4, pd or cluster tile) on `ctas` persistent CTAs; builds
// the activations' tensor map. Only for sm_90 devices. `pdl`: programmatic
// dependent launch (the weights of the first stages stream in while the
// previous kernel finishes; launch_pdl.cuh).
// Cluster tiles: `ctas` must be p.units, and p.splits (the cluster size) at
// most kMaxClusterSplits. Multicast pairs: `ctas` even (two per cluster; the
// launch takes at most as many clusters as fit at once), p.units counts
// pairs of n blocks.
void launch_kernel(int tile, bool g128, const Params& p, int ctas, cudaStream_t stream, bool pdl);
// The INT8-weight tiles: `w8` INT8 [n, k] row-major (16-B aligned, k % 64 == 0),
// g128 = the epilogue without the zero-point term (also W8A8's).
void launch_kernel_s8(int tile, bool g128, const int8_t* w8, const Params& p, int ctas, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8::wgmma
