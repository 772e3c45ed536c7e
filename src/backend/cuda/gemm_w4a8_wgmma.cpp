// The sm_90a W4A8 family's planner and launch (kernels: gemm_w4a8_wgmma_*.cu,
// design: docs/gemm-hopper.md).
#include "backend/cuda/gemm_w4a8_wgmma.h"

#include <algorithm>
#include <cstdint>

#include "backend/cuda/gemm_w4a8_dequant.h"
#include "backend/cuda/gemm_w4a8_gemv.h"
#include "backend/cuda/gemm_w4a8_launch.h"
#include "backend/cuda/gemm_w4a8_measured.h"
#include "backend/cuda/gemm_w4a8_tile_names.h"
#include "backend/cuda/gemm_w4a8_timeline.h"
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "core/error.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda {
namespace {

using w4a8::wgmma::kTiles;
using w4a8::wgmma::TileShape;
static_assert(kW4A8FirstS8Tile - kW4A8FirstWgmmaTile == w4a8::wgmma::kFirstS8Tile);
static_assert(kW4A8FirstPdTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kFirstPdTile);
static_assert(kW4A8FirstClusterTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kFirstClusterTile);
static_assert(kW4A8FirstGemvTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kTileCount);
static_assert(kW4A8EndClusterTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kEndClusterTile);
static_assert(kW4A8FirstBn64Tile - kW4A8FirstWgmmaTile == w4a8::wgmma::kFirstBn64Tile);
static_assert(kW4A8FirstMidTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kFirstMidTile &&
              kW4A8EndMidTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kEndMidTile);
static_assert(kW4A8FirstMcTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kFirstMcTile);
static_assert(kW4A8MaxClusterSplits == w4a8::wgmma::kMaxClusterSplits);
static_assert(kW4A8FirstStreamKTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kFirstStreamKTile &&
              kW4A8EndStreamKTile - kW4A8FirstWgmmaTile == w4a8::wgmma::kEndStreamKTile);
static_assert([] {
  for (int t = 0; t < w4a8::wgmma::kTileCount; ++t)
    if ((kTiles[t].kd > 1) != w4a8_tile_is_deep(t + kW4A8FirstWgmmaTile) ||
        kTiles[t].bn64 != w4a8_tile_is_bn64(t + kW4A8FirstWgmmaTile))
      return false;
  return true;
}());

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Relative cost of one problem on one tile with `splits`: rounds of units
// over the SMs (one persistent CTA per SM) x the time of one unit, counted in
// 128-wide k stages; with split-K each unit writes its INT32 partial tile and
// the last one of a tile reads the others' (splits x 4 bytes per output, on
// the critical path), counted in stages by the bytes a stage moves (weights
// + activations). Padding waste is in the tile counts; a stage of a larger
// tile costs more (its bytes at small m, its MACs above). Checked against
// sweeps of every tile x split on the H200 (the results file).
double unit_cost(const TileShape& s, int64_t m, int64_t n, int64_t kt_total, int splits, int sms, double tile_eff) {
  const int64_t units = cdiv(n, s.bn()) * cdiv(m, s.bm) * splits;
  const int64_t rounds = cdiv(units, int64_t{sms} * s.occ);
  const double stage_bytes = 64.0 * s.bn() + 128.0 * s.bm;
  const double fixup =
      splits > 1 ? 4.0 * static_cast<double>(std::min<int64_t>(m, s.bm)) * s.bn() * splits / stage_bytes + 1.0 : 0.0;
  const double stage = static_cast<double>(s.bn()) * std::max(s.bm, 64) / tile_eff;
  return static_cast<double>(rounds) * (static_cast<double>(cdiv(kt_total, splits)) + fixup) * stage;
}

}  // namespace

// The measured wgmma plan where the table has one (the benchmark's layer
// shapes at m <= 512, a few rows above: gemm_w4a8_measured.cpp); else, at m <= 128 on a layer
// of fewer than kClusterMaxTiles output tiles, a cluster tile (split-K
// within a cluster, cluster_tile_for); else tile by m: the smallest wgmma N
// that holds m up to 64 tokens (decode: memory-bound, 256 channels per CTA to
// move more weight bytes per stage); above, the cheapest of the large tiles
// by the model above. Split-K when the units would leave SMs idle; stream-K
// (128 x 128) when those tiles fill at most 65% of the SMs over a long k.
//
// The dequantization pass + INT8-weight tiles (s8) run only where asked for
// (plan_w4a8_wgmma_s8, forced tiles) and for W8A8 (gemm_s8.h). They were the
// g128 plan at m >= 1024 until the level-2 words came with each stage
// (round 6): since then the W4 tiles dequantizing in the consumers measure
// 0.82-1.12x of cuBLASLt INT8 at m = 1024 on the 9 benchmark layers against
// 0.61-0.89x for the pass + s8 plan in the same run, and are faster on all
// 27 g128 rows at m = 512-4096 (bench/results/2026-11-30-gemm-h200-r6.md, round K).
namespace {
// INT8-weight tiles below this m: the 128 x 128 tile only (W8A8 at 256 <= m < 1024).
constexpr int64_t kS8MinTokens = 1024;

// The cluster tile for m tokens on a layer outside the measured table
// (local ids): the deep-stage (256-wide k stages) 256 x 8 / 16 (two
// accumulator sets), 256 x 32 and 128 x 64 tiles up to m = 128; -1 above.
// The deep stages measured as fast or faster than the 128-wide ones on every
// layer of the table's sweeps, by 2-8% (bench/results/2026-11-30-gemm-h200-r8.md);
// they take any k (a half last block as the one-block stages). Taken while
// the layer has fewer than kClusterMaxTiles output tiles, with splits for
// about kClusterCtas CTAs.
constexpr int64_t kClusterMaxTiles = 64, kClusterCtas = 96;
int cluster_tile_for(int64_t m) {
  constexpr int d = kW4A8FirstDeepTile - kW4A8FirstWgmmaTile;  // wg128x8c-k256
  if (m <= 8) return d + 4;    // 256 x 8, two accumulator sets
  if (m <= 16) return d + 5;   // 256 x 16, two accumulator sets
  if (m <= 32) return d + 6;   // 256 x 32
  if (m <= 128) return d + 7;  // 128 x 64
  return -1;
}

// Which tiles the planner takes: the W4 tiles (the measured table first) or
// the INT8-weight tiles (plan_w4a8_wgmma_s8: W8A8, or W4 after the pass).
// The producer-dequantizing tiles (pd) are not planned (0.36-0.50x).
enum class LargeM { kW4, kS8 };

// The decode kernels' plan: a CTA per 16-channel tile, at most three (gemv8)
// or two (gemv16) per SM (more tiles: the CTAs walk them), no split-K (a
// forced split count is ignored), no workspace.
W4A8Plan plan_gemv(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int tile, bool g128) {
  const int64_t tokens = w4a8_tile_tokens(tile);
  if (m > tokens) fail(ErrorCode::kInvalidArgument, "{} takes m <= {}, got {}", w4a8_tile_name(tile), tokens, m);
  if (!w4a8_gemv_fits(dev, tile, k, g128))
    fail(ErrorCode::kInvalidArgument, "{}: the activation rows of k = {} do not fit in shared memory",
         w4a8_tile_name(tile), k);
  W4A8Plan plan;
  plan.tile = tile;
  plan.splits = 1;
  plan.kt_per_split = static_cast<int>(cdiv(k, 128));
  plan.grid_n = static_cast<int>(cdiv(n, 16));
  plan.grid_m = 1;
  plan.ctas = static_cast<int>(std::min<int64_t>(
      plan.grid_n, w4a8::gemv::ctas_per_sm(w4a8_gemv_kernel(tile)) * int64_t{std::max(1, dev.sm_count)}));
  plan.workspace_bytes = 0;
  plan.pdl = pdl_enabled(dev);
  return plan;
}

// The decode kernels instead of the table and the rule (-1: neither):
// - m <= 4 on layers of at most two 16-channel tiles per SM and k <= 16384:
//   gemv8d (two CTAs per SM, two chunks of weights in flight per warp).
//   Measured in bench/results/2026-11-30-gemm-h200-r14.md (rounds 2-3, back
//   to back and after a 5-us neighbor): on the 4096 x 4096 layers 1.04-1.31x
//   faster than gemv8, on the down layers (4096 x 14336 / 11008) 1.06-1.34x.
//   Not on 70B down (512 tiles, k = 28672: the wgmma plans 1.13-1.18x
//   faster). At m = 5..8 (its activation ring) it was 0.94-1.30x the plans
//   below in the benchmark, but the engine's decode at 8 sequences ran 4%
//   slower with it on g128 (round 4), so the rule stops at m = 4.
// - m <= 4 on other layers of at most six 16-channel tiles per SM (two waves
//   of gemv8's three CTAs per SM) and k <= 16384: gemv8 (activations loaded
//   straight from X). Measured against the planner's plans (rounds 6-8 of
//   bench/results/2026-11-30-gemm-h200-r12.md, the benchmark's layers at m =
//   1, 2, 4, 8): after another kernel, as in a model, 1.04-1.73x faster on
//   every such layer and kind; back to back 1.15-1.34x on the 6144 x 4096
//   layer, even (0.94-1.09) on the 12288-row one. On the wider or longer
//   layers (gate_up: 3.5-4.5 waves of its CTAs; 70B down: 56 k64 blocks per
//   warp) it lost. The engine (Llama-3-8B shapes, 1 / 4 sequences): decode
//   6-8% faster (round 9).
// - 5 <= m <= 8: gemv8 with the activation ring on k <= 4096 layers of one
//   to six tiles per SM (the qkv and o layers measured in
//   bench/results/2026-11-30-gemm-h200-r13.md).
// - 9 <= m <= 16: gemv16 (two CTAs per SM) on k <= 4096 layers of one to
//   two tiles per SM (the o layers; ...-r13.md), at m >= 12 only where the
//   table has no entry (kGemv16TableFromM, plan_impl).
int decode_tile(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k) {
  const int64_t tiles = cdiv(n, 16), sms = std::max(1, dev.sm_count);
  using w4a8::gemv::Kernel;
  constexpr int kGemv8 = w4a8_gemv_tile(Kernel::kGemv8), kGemv16 = w4a8_gemv_tile(Kernel::kGemv16),
                kGemv8Deep = w4a8_gemv_tile(Kernel::kGemv8Deep);
  if (m > 16 || k > 16384) return -1;
  if (m <= w4a8::gemv::kMaxDirectTokens) return tiles <= 2 * sms ? kGemv8Deep : tiles <= 6 * sms ? kGemv8 : -1;
  if (k > 4096 || tiles < sms) return -1;
  if (m <= 8) return tiles <= 6 * sms ? kGemv8 : -1;
  return tiles <= 2 * sms ? kGemv16 : -1;
}

// From this m, gemv16 gives way to the table's entry in m's bucket (the
// 4096 x 4096 layers' 128 x 16 cluster plan, split 3): round 42 (H100,
// bench/results/2026-12-06-gemm-h100-r42.md), the engine at 12 and 16
// sequences 1.7-3.5% faster on six of eight model x kind x batch cells, even
// on the other two; the GEMM after a 5-us neighbor 0.92 of gemv16's time at m
// = 16 and 1.10 at m = 9 (gemv16's work grows with m, the cluster plan's not).
constexpr int64_t kGemv16TableFromM = 12;

// table: whether the measured table may plan (false: the rule's own choice).
W4A8Plan plan_impl(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile, int force_splits, bool g128,
                   LargeM path, bool table = true) {
  const bool any_s8 = path == LargeM::kS8;
  QS_CHECK(m > 0 && n > 0 && k > 0 && k % quant::kMmaTileK == 0);
  QS_CHECK(force_tile < 0 || w4a8_tile_is_wgmma(force_tile)) << "not a wgmma tile: " << force_tile;
  if (force_splits < 0 && force_splits != kW4A8StreamK)
    fail(ErrorCode::kInvalidArgument, "bad split-K factor {}", force_splits);
  // The measured table's entry (or a QSERVE_W4A8_PLANS override) for a
  // planner's choice on the W4 path; the decode kernels go before the table
  // but not before an override.
  const bool choose = force_tile < 0 && force_splits == 0 && path == LargeM::kW4;
  const int decode = choose ? decode_tile(dev, m, n, k) : -1;
  bool overridden = false;
  const auto entry = choose && (table || decode >= 0) ? measured_w4a8_plan(m, n, k, g128, &overridden) : std::nullopt;
  if (decode >= 0 && !overridden && !(table && entry && m >= kGemv16TableFromM))
    return plan_gemv(dev, m, n, k, decode, g128);
  if (table && choose) {
    if (const auto& c = entry) {
      // Below its bucket's top (where it was measured, before the 160-224-token
      // tiles existed) a table entry above m = 128 gives way to the rule when the
      // rule takes a 160-224-token tile; not the cluster tiles' entries of up to
      // 64 tokens (the 128 x 128 one, round 25, does), not
      // QSERVE_W4A8_PLANS. Over the m = 160-448 grids of rounds 3-6 of
      // bench/results/2026-11-30-gemm-h200-r11.md (four independent timing
      // runs, every plan timed) the plans then came within 0.1-1.3% of each
      // row's fastest (worst 1.03-1.19x), against 2.2-2.3% (worst 1.28x)
      // without this step.
      if (!overridden && m > 128 && m != w4a8_m_bucket(m) && !w4a8_tile_is_small_cluster(c->tile)) {
        const W4A8Plan rule = plan_impl(dev, m, n, k, -1, 0, g128, path, false);
        if (rule.tile >= kW4A8FirstMidTile && rule.tile < kW4A8EndMidTile) return rule;
      }
      force_tile = c->tile, force_splits = c->splits;
    }
  }
  if (force_tile >= 0 && w4a8_tile_is_gemv(force_tile)) return plan_gemv(dev, m, n, k, force_tile, g128);
  bool stream_k = force_splits == kW4A8StreamK;
  if (stream_k) force_splits = 1;  // the tile is chosen as for one split
  const int sms = std::max(1, dev.sm_count);
  const int64_t kt_total = cdiv(k, 128);
  // >= 2 stages per split; a cluster tile's splits are the cluster's CTAs.
  const int max_cluster_splits = static_cast<int>(std::clamp<int64_t>(kt_total / 2, 1, kW4A8MaxClusterSplits));
  const bool cluster = force_tile >= 0 && w4a8_tile_is_cluster(force_tile);
  const int max_splits = cluster ? max_cluster_splits : static_cast<int>(std::clamp<int64_t>(kt_total / 2, 1, 16));
  W4A8Plan plan;
  int local = 0, splits = 1;
  double best = -1;
  // large_m: the large-m rule's split-K only while the unsplit output tiles
  // leave SMs idle and each split keeps >= kMinSplitStages (2048 of k). Until round
  // 17 the threshold was 64 stages: the fix-up then went through an
  // [splits][m][n] array at 5-15 us a tile, and split 2 had won only on the
  // longest k (rounds 2 and 4 of bench/results/2026-11-30-gemm-h200-r11.md).
  // With the fix-up as pieces, split 2 of 128 x 128 on layers outside the
  // table at m = 160-256 (call 5 of bench/results/2026-12-02-gemm-h200-r17.md):
  // 3584 x 18944 36.4 / 32.0 us against stream-K's 44.7 / 34.5, 3072 x 8192
  // 20.1 / 17.7 against 25.2 / 20.0; at 12-14 stages a split (3072 x 3072,
  // 3584 x 3584) g128 gained 3-8% and per-channel lost up to 5%, hence 16.
  constexpr int64_t kMinSplitStages = 16;
  auto consider = [&](int t, double eff, bool large_m = false) {
    const bool full = cdiv(n, kTiles[t].bn()) * cdiv(m, kTiles[t].bm) >= sms;
    for (int sp = 1; sp <= max_splits; ++sp) {
      if (force_splits > 0 && sp != force_splits) continue;
      if (sp > 1 && large_m && (full || cdiv(kt_total, sp) < kMinSplitStages)) break;
      const double c = unit_cost(kTiles[t], m, n, kt_total, sp, sms, eff);
      if (best < 0 || c < best * 0.999) best = c, local = t, splits = sp;
    }
  };
  constexpr int s8 = w4a8::wgmma::kFirstS8Tile;
  if (force_tile >= 0) {
    local = force_tile - kW4A8FirstWgmmaTile;
    QS_CHECK(local < w4a8::wgmma::kTileCount);
    if (force_splits > 0) splits = force_splits;
    else consider(local, 1.0);
  } else if (any_s8 && m < kS8MinTokens) {
    // W8A8 at 256 <= m < 1024: the large tiles' split-K measured 1.2-2.3x
    // slower than 128 x 128, which the model does not see.
    consider(s8 + 2, 0.85);
  } else if (any_s8) {
    consider(s8, 1.0);         // 256 x 128
    consider(s8 + 1, 1.0);     // 128 x 256
    consider(s8 + 2, 0.85);    // 128 x 128
  } else if (const int64_t blocks64 = cdiv(n, 64);
             m > 32 && m <= 64 && blocks64 * 2 <= sms && max_cluster_splits >= 2) {
    // 33-64 tokens on a layer of at most sms / 2 channel blocks of 64: the
    // 64-channel cluster tile `wg64x64c-k256` in clusters of two (at most
    // the SMs' worth of CTAs), not the 128 x 64 tile at about kClusterCtas
    // CTAs below (clusters of 3-6). Measured in the engine's decode (an H100,
    // rounds 51-52: bench/results/2026-12-07-gemm-h100-r51.md, -r52.md):
    // - the table's 4096-row layers: the tile at split 2 +5.4-6.6% of the
    //   step over split-3 plans; a 128-channel split-2 plan 8-21% slower back
    //   to back than the split-3 one was faster or even in the engine;
    // - Llama-3.2-3B (n = 3072): +2.5-5.5% over clusters of four;
    // - Llama-3.2-1B (n = 2048): split 2 (64 CTAs) +7.8-9.0% per-channel and
    //   even to +4.9% g128 over clusters of six / four; split 4 (128 CTAs in
    //   clusters of four, above the 120 that 30 resident clusters hold) ran
    //   in two waves, -6% / -11%; down alone at split 3, or on the old
    //   split-6 plan beside the others at split 2, -8% to -10%.
    // Clusters other than pairs cost the step beyond their own time; why is
    // not measured. On a layer of more than sms / 2 blocks (qkv, n = 6144) the
    // 64-channel tile at split 1 lost (-1.4% / -0.5%); those keep the rule below.
    constexpr int kRuleTile = w4a8_tile("wg64x64c-k256") - kW4A8FirstWgmmaTile;  // looked up when this compiles
    local = kRuleTile;
    splits = 2;
  } else if (const int ct = cluster_tile_for(m);
             ct >= 0 && cdiv(n, kTiles[ct].bn()) * cdiv(m, kTiles[ct].bm) < kClusterMaxTiles) {
    // Few output tiles at small and mid m: split-K within clusters, about
    // kClusterCtas CTAs (the measured optimum on the benchmark's o, qkv and
    // down layers: 48-128 CTAs, i.e. 2-6 splits).
    local = ct;
    const int64_t tiles = cdiv(n, kTiles[ct].bn()) * cdiv(m, kTiles[ct].bm);
    splits = static_cast<int>(std::clamp<int64_t>(kClusterCtas / tiles, 1, max_cluster_splits));
  } else if (m <= 64) {
    consider(m <= 8 ? 0 : m <= 16 ? 1 : m <= 32 ? 2 : 3, 1.0);
  } else {
    // From m = 512 the tiles with more tokens per weight (128 x 256, 128 x
    // 128) won every g128 row of round 6's sweep (bench/results/2026-11-30-
    // gemm-h200-r6.md, round K) and 25 of the 27 per-channel rows at m = 1024
    // / 4096 / 8192 of round 9's, by up to 1.25x (bench/results/2026-11-30-
    // gemm-h200-r9.md; the two others, the 70B down layer at m >= 4096, are
    // in the measured table); below, 256 x 128 stays a candidate (the
    // measured table takes it at m = 65-128 on the wide layers).
    if (m < 512) consider(4, 1.0, true);  // 256 x 128
    consider(5, 1.0, true);             // 128 x 256
    consider(6, 0.85, true);            // 128 x 128: less work per stage
    // The 160-224-token tiles where they need fewer waves: a tile's time
    // modeled as (c0 + tokens) x a constant, relative to 128 x 256; c0 = 96
    // from the per-wave times of 128 x 128 and 128 x 256 on k = 4096 (14.7
    // and 23.1 us, per-channel, round 10 of bench/results/2026-11-30-gemm-
    // h200-r10.md), 128 for g128 (more dequantization work per stage that
    // does not scale with the tokens). With equal waves the smaller tile
    // wins. Against round 1 of ...-r11.md (the nine benchmark layers at
    // m = 768-3072, both kinds, every tile of 128 channels timed): the
    // rule's plan within 0.8% (per-channel) and 0.1% (g128) of the fastest
    // tile, geometric mean; 6.8% / 5.5% without these tiles.
    const double c0 = g128 ? 128.0 : 96.0;
    for (int t = w4a8::wgmma::kFirstMidTile; t < w4a8::wgmma::kEndMidTile; ++t)
      consider(t, kTiles[t].bm * (c0 + 256) / (256.0 * (c0 + kTiles[t].bm)), true);
    // (Stream-K, which this rule took until round 17 for 128 x 128 where its
    // output tiles filled at most 65% of the SMs on a long k, lost to split 2
    // of the same tile on every such layer once split-K's fix-up became
    // pieces: 5-25% in call 5 of bench/results/2026-12-02-gemm-h200-r17.md.
    // It stays for the table's entries and forced plans.)
    // The multicast pair of 128 x 256 (half the activations' L2 traffic, the
    // two CTAs of a pair in step) for the largest problems only: timed
    // against 128 x 256 in separate processes in turn (round 3 of
    // bench/results/2026-11-30-gemm-h200-r12.md, nine layers at m = 1024-8192)
    // it was 2-4% slower at m = 1024 and even at 2048-4096 (geometric means),
    // faster at m = 8192 (g128 0.978, per-channel 0.986) and on the largest
    // layers: g128 on all seven rows of >= 4.5e11 multiply-adds (0.91-0.99,
    // geometric mean 0.962), per-channel on the three of >= 9e11 (0.95-0.99);
    // on six held-out layers (round 5) g128 0.96-1.00 on the eight rows of
    // >= 4.5e11, per-channel 0.91-0.97 on the three of >= 9e11.
    if (force_splits == 0 && !stream_k && local == 5 && splits == 1 &&
        static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= (g128 ? 4.5e11 : 9e11))
      local = w4a8::wgmma::kFirstMcTile;
  }
  if (force_splits > 0) splits = force_splits;
  const TileShape& s = kTiles[local];
  splits = static_cast<int>(std::clamp<int64_t>(splits, 1, kt_total));
  if (s.cluster) splits = std::min(splits, kW4A8MaxClusterSplits);
  plan.tile = kW4A8FirstWgmmaTile + local;
  plan.kt_per_split = static_cast<int>(cdiv(kt_total, splits));
  plan.splits = static_cast<int>(cdiv(kt_total, plan.kt_per_split));  // no empty split
  plan.grid_n = static_cast<int>(cdiv(n, s.bn()));
  plan.grid_m = static_cast<int>(cdiv(m, s.bm));
  const int64_t units = int64_t{plan.grid_n} * plan.grid_m * plan.splits;
  plan.ctas = static_cast<int>(std::min<int64_t>(units, int64_t{sms} * s.occ));  // persistent: every resident CTA
  plan.tile_ints = int64_t{s.bn()} * s.bm;  // the split-K pieces (gemm_w4a8.h)
  plan.workspace_bytes = plan.workspace_bytes_for(m, n);
  if (s.mc) {  // pairs of n blocks, two CTAs each
    const int64_t pairs = cdiv(plan.grid_n, 2) * plan.grid_m * plan.splits;
    plan.ctas = static_cast<int>(2 * std::min<int64_t>(pairs, sms / 2));
    QS_CHECK(plan.ctas >= 2) << "a multicast pair needs 2 SMs";
  }
  if (s.cluster) {  // one CTA per unit; the split-K sums stay in the clusters
    QS_CHECK(units < (int64_t{1} << 31));
    plan.ctas = static_cast<int>(units);
    plan.workspace_bytes = 0;
  }
  if (stream_k) {
    if (!w4a8::wgmma::is_stream_k_tile(local))
      fail(ErrorCode::kInvalidArgument,
           "stream-K takes the persistent W4 tiles (wg256x8 .. wg128x128, no cluster, INT8-weight or deep-stage "
           "tile), not {}",
           w4a8_tile_name(plan.tile));
    plan.splits = kW4A8StreamK;
    plan.kt_per_split = static_cast<int>(kt_total);
    const int64_t stages = int64_t{plan.grid_n} * plan.grid_m * kt_total;  // of all output tiles
    QS_CHECK(stages < (int64_t{1} << 31));
    plan.ctas = static_cast<int>(std::min<int64_t>(stages, sms));
    plan.workspace_bytes = plan.workspace_bytes_for(m, n);
  }
  if (s.s8) {
    plan.scratch_bytes = static_cast<size_t>(n) * k;
    plan.workspace_bytes = plan.scratch_offset(m, n) + plan.scratch_bytes;
  }
  plan.pdl = pdl_enabled(dev);  // measured: 5-25% faster at m <= 256 (bench/results/2026-11-29-gemm-h200-r3.md)
  return plan;
}
}  // namespace

W4A8Plan plan_w4a8_wgmma(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile, int force_splits,
                         bool g128) {
  return plan_impl(dev, m, n, k, force_tile, force_splits, g128, LargeM::kW4);
}

W4A8Plan plan_w4a8_wgmma_s8(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_splits) {
  return plan_impl(dev, m, n, k, -1, force_splits, true, LargeM::kS8);
}

w4a8::wgmma::Params wgmma_params(const W4A8Args& args, const W4A8Plan& plan, void* workspace, int64_t n, int64_t k) {
  const int local = plan.tile - kW4A8FirstWgmmaTile;
  QS_CHECK(local >= 0 && local < w4a8::wgmma::kTileCount);
  const TileShape& s = kTiles[local];
  QS_CHECK(plan.grid_n == cdiv(n, s.bn()) && plan.grid_m == cdiv(args.m, s.bm)) << "plan made for another shape";
  QS_CHECK(args.m > 0 && args.x && (args.y || args.acc_out));
  QS_CHECK(args.acc_out || args.s_x) << "the fp16 epilogue needs s_x";
  QS_CHECK(reinterpret_cast<uintptr_t>(args.x) % 16 == 0) << "TMA needs 16-byte aligned activations";
  QS_CHECK(plan.ctas > 0 && (workspace || plan.workspace_bytes == 0));
  QS_CHECK(args.m * n < (int64_t{1} << 31) && args.m * k < (int64_t{1} << 31))
      << "m * n or m * k too large for 32-bit indexing";
  w4a8::wgmma::Params p{};
  p.x = args.x;
  p.s_x = args.s_x;
  p.a_sum = args.a_sum;
  p.x_sum = args.x_sum;
  p.y = args.y;
  p.acc_out = args.acc_out;
  // (The cluster tiles need no workspace: null, and no split-K fix-up reads it.)
  p.counters = static_cast<int*>(workspace);
  p.partials =
      workspace ? reinterpret_cast<int32_t*>(static_cast<char*>(workspace) + plan.counter_bytes()) : nullptr;
  p.m = static_cast<int>(args.m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.n16 = static_cast<int>(cdiv(n, 16));
  p.blocks128 = static_cast<int>(cdiv(n, 128));
  p.grid_n = plan.grid_n;
  p.grid_m = plan.grid_m;
#ifdef QSERVE_GEMM_TIMELINE
  p.timeline = w4a8_timeline_buffer();  // (null unless switched on)
#endif
  if (plan.splits == kW4A8StreamK) {
    p.stream_k = 1;
    p.splits = 1;
    p.kt_per_split = plan.kt_per_split;
    p.units = 0;
    return p;
  }
  p.splits = plan.splits;
  p.kt_per_split = plan.kt_per_split;
  p.units = (s.mc ? (plan.grid_n + 1) / 2 : plan.grid_n) * plan.grid_m * plan.splits;
  return p;
}

void gemm_w4a8_wgmma(const W4A8DeviceWeights& w, const W4A8Args& args, const W4A8Plan& plan, void* workspace,
                     cudaStream_t stream) {
  QS_CHECK(w.kind == W4A8Kind::kG128 || args.acc_out || args.a_sum) << "per-channel W4A8 needs a_sum";
  QS_CHECK(w.kind != W4A8Kind::kG128 || args.x_sum) << "g128 W4A8 needs x_sum";
  QS_CHECK(!w4a8_tile_is_gemv(plan.tile)) << "the decode kernel runs through gemm_w4a8";
  QS_CHECK(w.k <= w4a8::kMaxU8AccK) << "k = " << w.k << ": the wgmma kernels' INT32 accumulators hold k <= "
                                           << w4a8::kMaxU8AccK;
  const int local = plan.tile - kW4A8FirstWgmmaTile;
  const TileShape& s = kTiles[local];
  w4a8::wgmma::Params p = wgmma_params(args, plan, workspace, w.n, w.k);
  p.w = w.qweight.as<const uint8_t>();
  p.level2 = w.level2.as<const uint32_t>();
  p.ch_scale = w.ch_scale.as<const float>();
  p.ch_szero = w.ch_szero.as<const float>();
  p.n16 = static_cast<int>(w.n16);
  p.groups = static_cast<int>(w.groups);
  if (s.s8) {
    // The dequantization pass writes the INT8 copy (launched without PDL: the
    // previous GEMM may still read the scratch), then the INT8-weight kernel.
    QS_CHECK(plan.scratch_bytes == static_cast<size_t>(w.n * w.k)) << "plan made for another shape";
    int8_t* w8 = reinterpret_cast<int8_t*>(static_cast<char*>(workspace) + plan.scratch_offset(args.m, w.n));
    launch_w4_dequant(p.w, p.level2, w.n, w.k, w.n16, w.groups, w.kind == W4A8Kind::kG128, w8, stream);
    p.w_after_wait = 1;
    w4a8::wgmma::launch_kernel_s8(local, w.kind == W4A8Kind::kG128, w8, p, plan.ctas, stream, plan.pdl);
    return;
  }
  // The cluster tiles' consumers walk their unit from stage 0 in unrolled
  // groups (kernels/gemm_w4a8_wgmma_kernel.cuh, kRing): one unit per CTA.
  QS_CHECK(!s.cluster || plan.ctas == p.units)
      << "cluster tile launched with " << plan.ctas << " CTAs for " << p.units << " units";
  w4a8::wgmma::launch_kernel(local, w.kind == W4A8Kind::kG128, p, plan.ctas, stream, plan.pdl);
}

}  // namespace qserve::cuda
