// The W4A8 planner on the host (no GPU needed): the family by device and
// size, the wgmma plans' grid / split-K / workspace arithmetic on every
// benchmark shape, the measured plan table, its run-time overrides
// (QSERVE_W4A8_PLANS) and the kernel-form switches (gemm_w4a8_switches.h).
// The GPU cases of the same kernels: test_gemm_w4a8.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "core/error.h"

#ifdef QSERVE_HAVE_CUDA
#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_measured.h"
#include "backend/cuda/gemm_w4a8_overrides.h"
#include "backend/cuda/gemm_w4a8_switches.h"
#include "backend/cuda/gemm_w4a8_tile_names.h"
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#endif

namespace qserve {
namespace {

#ifdef QSERVE_HAVE_CUDA

// The planner needs no GPU: the family by device and size, and the wgmma
// plans' grid / split-K / workspace arithmetic on every benchmark shape.
TEST(GemmW4A8Planner, FamilyAndPlans) {
  cuda::DeviceInfo a100, h200;
  a100.cc_major = 8, a100.sm_count = 108;
  h200.cc_major = 9, h200.sm_count = 132;
  const std::pair<int64_t, int64_t> shapes[] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336},
                                                {12288, 4096}, {22016, 4096}, {4096, 11008}, {8192, 28672},
                                                {576, 576},    {200, 448},    {1408, 2880}};
  for (auto [n, k] : shapes)
    for (int64_t m : {1, 7, 16, 33, 64, 100, 128, 255, 256, 257, 1024, 4097, 8192})
      for (bool g : {false, true}) {
        SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " m " + std::to_string(m));
        EXPECT_FALSE(cuda::w4a8_tile_is_wgmma(cuda::plan_w4a8(a100, m, n, k, -1, 0, g).tile));
        EXPECT_TRUE(cuda::w4a8_tile_is_wgmma(cuda::plan_w4a8(h200, m, n, k, -1, 0, g).tile));
        const cuda::W4A8Plan p = cuda::plan_w4a8_wgmma(h200, m, n, k, -1, 0, g);
        ASSERT_TRUE(cuda::w4a8_tile_is_wgmma(p.tile));
        const int64_t kt_total = (k + 127) / 128;
        if (cuda::w4a8_tile_is_gemv(p.tile)) {
          // The decode kernels: m <= 32, k <= 16384 (m > 4: at least one
          // 16-channel tile per SM, and k <= 4096 but for the one table
          // entry of a decode kernel: g128 gemv8d on 4096 x 11008 at m =
          // 5..8, round 34), a CTA per 16 channels, at most three (gemv8) /
          // two (gemv16, gemv8d) per SM, no split-K, no workspace.
          const std::string name = cuda::w4a8_tile_name(p.tile);
          const bool gemv8d_entry = g && n == 4096 && k == 11008 && m > 4 && m <= 8;
          EXPECT_LE(m, cuda::w4a8_tile_tokens(p.tile));
          EXPECT_LE(k, 16384);
          if (m > 4) {
            if (!gemv8d_entry) {
              EXPECT_LE(k, 4096);
            }
            EXPECT_GE((n + 15) / 16, 132);
          }
          EXPECT_EQ(name == "gemv8d", (m <= 4 && (n + 15) / 16 <= 2 * 132) || gemv8d_entry);
          EXPECT_NE(name, "gemv16d");  // built for measurement, not planned (gemm_w4a8_gemv.h)
          EXPECT_NE(name, "gemv8r");   // not planned
          EXPECT_NE(name, "gemv16r");  // not planned since round 34 (Llama-3-8B qkv g128 at m = 9-16: a cluster tile)
          EXPECT_NE(name, "gemv32r");  // not planned since round 29 (the 4096 x 4096 layers' m = 17-32: a cluster tile)
          EXPECT_EQ(p.ctas, std::min<int64_t>((n + 15) / 16, (name == "gemv8" ? 3 : 2) * 132));
          EXPECT_EQ(p.splits, 1);
          EXPECT_EQ(p.workspace_bytes, 0u);
          continue;
        }
        if (p.splits == cuda::kW4A8StreamK) {
          // Stream-K: one CTA per SM (or per stage), the pieces after the counters.
          EXPECT_TRUE(cuda::w4a8_tile_has_stream_k(p.tile));
          EXPECT_EQ(p.ctas, std::min<int64_t>(int64_t{p.grid_n} * p.grid_m * kt_total, h200.sm_count));
          EXPECT_EQ(p.workspace_bytes, p.counter_bytes() + size_t{2} * p.ctas * p.tile_ints * 4);
          continue;
        }
        EXPECT_GE(int64_t{p.splits} * p.kt_per_split, kt_total);
        EXPECT_LT(int64_t{p.splits - 1} * p.kt_per_split, kt_total);  // no empty split
        const int64_t units = int64_t{p.grid_n} * p.grid_m * p.splits;
        if (cuda::w4a8_tile_is_cluster(p.tile)) {
          // One CTA per unit, the splits of a tile one cluster; no workspace.
          EXPECT_EQ(p.ctas, units);
          EXPECT_LE(p.splits, cuda::kW4A8MaxClusterSplits);
          EXPECT_EQ(p.workspace_bytes, 0u);
        } else {
          EXPECT_GE(p.ctas, 1);
          EXPECT_LE(p.ctas, std::min<int64_t>(units, h200.sm_count));
          const size_t partials = p.splits > 1 ? static_cast<size_t>(p.splits) * m * n * 4 : 0;
          EXPECT_GE(p.workspace_bytes, static_cast<size_t>(p.grid_n) * p.grid_m * 4 + partials);
        }
      }
  // Outside the measured table, few output tiles at small m (above the
  // decode kernel's m <= 4) take a cluster tile with splits for about 96
  // CTAs: a 7168 x 7168 layer at m = 5 has 28 tiles of 256 channels -> 3
  // splits; the 576 x 576 layer's k allows 2.
  const cuda::W4A8Plan o7k = cuda::plan_w4a8(h200, 5, 7168, 7168, -1, 0, true);
  EXPECT_STREQ(cuda::w4a8_tile_name(o7k.tile), "wg256x8a2c-k256");
  EXPECT_EQ(o7k.splits, 3);
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 20, 7168, 7168, -1, 0, true).tile), "wg256x32c-k256");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 100, 2048, 8192, -1, 0, true).tile), "wg128x64c-k256");
  // At m = 33-64 on layers of at most 66 channel blocks of 64 (n <= 4224 on
  // 132 SMs), the 64-channel tile in clusters of two (rounds 51-52: clusters
  // of three to six cost the engine's step): Llama-3.2-3B o / down,
  // Llama-3.2-1B o / down, and an unmeasured k on n = 4096; not at m = 32 or
  // 65, nor on wider layers (Llama-3.2-3B qkv, n = 5120: 80 blocks), nor where
  // k has fewer than 4 blocks of 128 (k = 384: one split at most).
  const std::tuple<int64_t, int64_t, int64_t> rule64[] = {{64, 3072, 3072}, {33, 3072, 8192}, {64, 2048, 2048},
                                                           {48, 2048, 8192}, {64, 4096, 5120}, {64, 576, 576},
                                                           {64, 200, 448},   {40, 1408, 2880}};
  for (auto [m, n, k] : rule64)
    for (bool g : {false, true}) {
      SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k));
      const cuda::W4A8Plan p = cuda::plan_w4a8(h200, m, n, k, -1, 0, g);
      EXPECT_STREQ(cuda::w4a8_tile_name(p.tile), "wg64x64c-k256");
      EXPECT_EQ(p.splits, 2);
      EXPECT_EQ(p.grid_n, (n + 63) / 64);
      EXPECT_LE(p.ctas, 132);
    }
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{32, 3072, 3072}, {65, 3072, 3072}, {64, 5120, 3072},
                         {64, 1024, 384}})
    EXPECT_FALSE(cuda::w4a8_tile_is_bn64(cuda::plan_w4a8(h200, m, n, k, -1, 0, false).tile)) << m << " " << n;
  const cuda::W4A8Plan tiny = cuda::plan_w4a8(h200, 7, 576, 576, -1, 0, false);
  EXPECT_STREQ(cuda::w4a8_tile_name(tiny.tile), "wg256x8a2c-k256");
  EXPECT_EQ(tiny.splits, 2);
  // A wide layer keeps the persistent W4 tiles (Llama-2-70B gate_up, 224 tiles).
  EXPECT_FALSE(cuda::w4a8_tile_is_cluster(cuda::plan_w4a8(h200, 1, 57344, 8192, -1, 0, false).tile));
  // The decode kernels, for both kinds, before the table: at m <= 4 and k <=
  // 16384 gemv8d on layers of at most two 16-channel tiles per SM, gemv8 on
  // layers of at most six (two waves of its three CTAs per SM); gemv8 at m =
  // 5..8 on such layers of k <= 4096 and at least one tile per SM; gemv16 at
  // m = 9..16 on k <= 4096 layers of one to two tiles per SM, at m >= 12 only
  // where the table has no entry (round 42). Not above, nor on the wide,
  // narrow (576 x 576 at m = 7, below) or longer-k layers.
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 1, 4096, 4096, -1, 0, false).tile), "gemv8d");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 1, 6144, 4096, -1, 0, false).tile), "gemv8");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 4, 12288, 4096, -1, 0, true).tile), "gemv8");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 2, 4096, 14336, -1, 0, true).tile), "gemv8d");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 1, 576, 576, -1, 0, true).tile), "gemv8d");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 4, 4096, 11008, -1, 0, true).tile), "gemv8d");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 5, 4096, 4096, -1, 0, false).tile), "gemv8");
  // g128 4096 x 11008 (Llama-2-7B down) at m = 5..8: gemv8d through the table (round 34).
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 8, 4096, 11008, -1, 0, true).tile), "gemv8d");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 5, 4096, 11008, -1, 0, true).tile), "gemv8d");
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(h200, 8, 4096, 11008, -1, 0, false).tile));
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 5, 6144, 4096, -1, 0, false).tile), "gemv8");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 8, 12288, 4096, -1, 0, true).tile), "gemv8");
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(h200, 8, 6144, 14336, -1, 0, true).tile));
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 9, 4096, 4096, -1, 0, false).tile), "gemv16");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 11, 4096, 4096, -1, 0, true).tile), "gemv16");
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 16, 4096, 2560, -1, 0, true).tile), "gemv16");
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(h200, 16, 6144, 4096, -1, 0, false).tile));
  // Llama-3-8B qkv g128 at m = 9..16 takes the 128 x 16 cluster tile with 4
  // splits since round 34 (the resident gemv16r before). Since round 29 the
  // 4096 x 4096 layers at m = 17..32 take the 128 x 32 cluster tile with 3
  // splits (32 x 3 = 96 CTAs), no longer gemv32r.
  for (int64_t m : {9, 16}) {
    const cuda::W4A8Plan qkv16 = cuda::plan_w4a8(h200, m, 6144, 4096, -1, 0, true);
    EXPECT_STREQ(cuda::w4a8_tile_name(qkv16.tile), "wg128x16c");
    EXPECT_EQ(qkv16.splits, 4);
  }
  const cuda::W4A8Plan o32 = cuda::plan_w4a8(h200, 17, 4096, 4096, -1, 0, true);
  EXPECT_STREQ(cuda::w4a8_tile_name(o32.tile), "wg128x32c-k256");
  EXPECT_EQ(o32.splits, 3);
  EXPECT_EQ(o32.ctas, 96);
  EXPECT_EQ(cuda::plan_w4a8(h200, 32, 4096, 4096, -1, 0, true).ctas, 96);  // the bucket's top
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(h200, 16, 4096, 14336, -1, 0, false).tile));
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(h200, 17, 4096, 4096, -1, 0, false).tile));
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(h200, 1, 28672, 4096, -1, 0, false).tile));
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(h200, 1, 8192, 28672, -1, 0, false).tile));
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(h200, 1, 4096, 28672, -1, 0, true).tile));
  EXPECT_FALSE(cuda::w4a8_tile_is_gemv(cuda::plan_w4a8(a100, 1, 4096, 4096, -1, 0, false).tile));
  // Stream-K: one CTA per SM while the problem has that many stages, the
  // pieces' workspace [ctas][2][tile] after the counters; the persistent
  // W4 tiles only.
  constexpr int wg128x256 = cuda::w4a8_tile("wg128x256");
  const cuda::W4A8Plan sk = cuda::plan_w4a8(h200, 512, 6144, 4096, wg128x256, cuda::kW4A8StreamK, false);
  EXPECT_EQ(sk.splits, cuda::kW4A8StreamK);
  EXPECT_EQ(sk.ctas, 132);
  EXPECT_EQ(sk.tile_ints, 128 * 256);
  EXPECT_EQ(sk.workspace_bytes, sk.counter_bytes() + size_t{132} * 2 * 128 * 256 * 4);
  const cuda::W4A8Plan sk_small = cuda::plan_w4a8_wgmma(h200, 2, 200, 448, wg128x256, cuda::kW4A8StreamK, true);
  EXPECT_EQ(sk_small.ctas, 8);  // 2 tiles x 4 stages
  EXPECT_THROW(cuda::plan_w4a8_wgmma(h200, 16, 4096, 4096, cuda::kW4A8FirstClusterTile, cuda::kW4A8StreamK, false),
               Error);
  // The decode tiles too (Llama-2-7B gate_up at m = 1: 86 tiles of 256 x 8,
  // 32 stages each, on all 132 SMs), not the producer-dequantizing ones.
  const cuda::W4A8Plan sk_decode =
      cuda::plan_w4a8_wgmma(h200, 1, 22016, 4096, cuda::kW4A8FirstWgmmaTile, cuda::kW4A8StreamK, true);
  EXPECT_EQ(sk_decode.splits, cuda::kW4A8StreamK);
  EXPECT_EQ(sk_decode.grid_n, 86);
  EXPECT_EQ(sk_decode.ctas, 132);
  EXPECT_EQ(sk_decode.tile_ints, 256 * 8);
  EXPECT_EQ(sk_decode.workspace_bytes, sk_decode.counter_bytes() + size_t{132} * 2 * 256 * 8 * 4);
  EXPECT_THROW(cuda::plan_w4a8_wgmma(h200, 16, 4096, 4096, cuda::kW4A8FirstPdTile, cuda::kW4A8StreamK, false),
               Error);
  // Tile 30 (wg128x16c) runs two CTAs per SM (round 22): g128 Llama-2-7B
  // down at m = 16 takes it with 6 splits (round 29), 32 tiles x 6 = 192 CTAs
  // (one per unit, all resident at once on 132 SMs).
  const cuda::W4A8Plan two_per_sm = cuda::plan_w4a8(h200, 16, 4096, 11008, -1, 0, true);
  EXPECT_STREQ(cuda::w4a8_tile_name(two_per_sm.tile), "wg128x16c");
  EXPECT_EQ(two_per_sm.splits, 6);
  EXPECT_EQ(two_per_sm.ctas, 192);
  EXPECT_EQ(cuda::w4a8::wgmma::kTiles[two_per_sm.tile - cuda::kW4A8FirstWgmmaTile].occ, 2);
  // The 128 x 32 cluster tiles (round 23) at m = 17-32: 70B down per-channel
  // wg128x32c-k256 with 2 splits (64 tiles x 2 = 128 CTAs, 256-deep stages);
  // since round 36 Llama-2-7B qkv per-channel the two-CTAs-per-SM form with 2
  // splits (96 tiles x 2 = 192 CTAs, the push form's received parts apart;
  // round 31-35: wg128x32c-k512 unsplit) and Llama-3-8B gate_up g128 the same
  // form unsplit (224 tiles, all resident at once).
  const cuda::W4A8Plan down70 = cuda::plan_w4a8(h200, 32, 8192, 28672, -1, 0, false);
  EXPECT_STREQ(cuda::w4a8_tile_name(down70.tile), "wg128x32c-k256");
  EXPECT_EQ(down70.splits, 2);
  EXPECT_EQ(down70.ctas, 128);
  EXPECT_EQ(cuda::w4a8::wgmma::kTiles[down70.tile - cuda::kW4A8FirstWgmmaTile].kd, 2);
  const cuda::W4A8Plan qkv7 = cuda::plan_w4a8(h200, 20, 12288, 4096, -1, 0, false);
  EXPECT_STREQ(cuda::w4a8_tile_name(qkv7.tile), "wg128x32c-k256o2");
  EXPECT_EQ(qkv7.splits, 2);
  EXPECT_EQ(qkv7.ctas, 192);
  const cuda::W4A8Plan gate_up8 = cuda::plan_w4a8(h200, 20, 28672, 4096, -1, 0, true);
  EXPECT_STREQ(cuda::w4a8_tile_name(gate_up8.tile), "wg128x32c-k256o2");
  EXPECT_EQ(gate_up8.splits, 1);
  EXPECT_EQ(gate_up8.ctas, 224);
  EXPECT_EQ(cuda::w4a8::wgmma::kTiles[gate_up8.tile - cuda::kW4A8FirstWgmmaTile].occ, 2);
  EXPECT_THROW(cuda::plan_w4a8_wgmma(h200, 1024, 4096, 4096, cuda::kW4A8FirstS8Tile, cuda::kW4A8StreamK, false),
               Error);
  EXPECT_THROW(cuda::plan_w4a8_mma(h200, 16, 4096, 4096, -1, cuda::kW4A8StreamK, false), Error);
  // The rule outside the table (since round 17): split-K where the unsplit
  // output tiles leave SMs idle and each split keeps >= 16 stages, never
  // stream-K by itself. 4096 x 12288 at m = 256: 64 tiles of 128 x 128 ->
  // split 2 (128 CTAs, 48 stages each); 5120 x 3072 at m = 256: 80 tiles, so
  // split 2 would take two rounds -> unsplit; 3072 x 3072 at m = 256: 48
  // tiles but 12 stages a split -> unsplit.
  const cuda::W4A8Plan rule = cuda::plan_w4a8(h200, 256, 4096, 12288, -1, 0, true);
  EXPECT_STREQ(cuda::w4a8_tile_name(rule.tile), "wg128x128");
  EXPECT_EQ(rule.splits, 2);
  EXPECT_EQ(cuda::plan_w4a8(h200, 256, 5120, 3072, -1, 0, false).splits, 1);
  EXPECT_EQ(cuda::plan_w4a8(h200, 256, 3072, 3072, -1, 0, true).splits, 1);
  for (int64_t m : {129, 200, 256, 400, 1024})
    for (bool g : {false, true})
      EXPECT_NE(cuda::plan_w4a8(h200, m, 4096, 12288, -1, 0, g).splits, cuda::kW4A8StreamK) << m;
  // The multicast pair of 128 x 256 for the largest problems of the rule
  // (>= 4.5e11 multiply-adds g128, >= 9e11 per-channel): two CTAs per pair of
  // n blocks, at most the SMs; 128 x 256 below.
  auto tile_of = [&](int64_t m, int64_t n, int64_t k, bool g) {
    return std::string(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, m, n, k, -1, 0, g).tile));
  };
  const cuda::W4A8Plan mc = cuda::plan_w4a8(h200, 8192, 28672, 4096, -1, 0, true);
  EXPECT_STREQ(cuda::w4a8_tile_name(mc.tile), "wg128x256mc");
  EXPECT_EQ(mc.splits, 1);
  EXPECT_EQ(mc.ctas, 132);
  EXPECT_EQ(tile_of(8192, 28672, 4096, false), "wg128x256mc");  // 9.6e11
  EXPECT_EQ(tile_of(8192, 4096, 14336, true), "wg128x256mc");   // 4.8e11
  EXPECT_EQ(tile_of(8192, 4096, 14336, false), "wg128x256");
  EXPECT_EQ(tile_of(1024, 28672, 4096, true), "wg128x256");
  const cuda::W4A8Plan mc_odd = cuda::plan_w4a8_wgmma(h200, 7, 640, 576, cuda::kW4A8FirstMcTile, 1, true);
  EXPECT_EQ(mc_odd.grid_n, 5);
  EXPECT_EQ(mc_odd.ctas, 6);  // 3 pairs, the last one's second CTA without channels
  // The decode tile: one CTA per 16 channels, no split-K, no workspace; m up to their tokens.
  const cuda::W4A8Plan gv = cuda::plan_w4a8_wgmma(h200, 5, 4096, 4096, cuda::kW4A8FirstGemvTile, 3, true);
  EXPECT_STREQ(cuda::w4a8_tile_name(gv.tile), "gemv8");
  EXPECT_EQ(gv.ctas, 256);
  EXPECT_EQ(gv.splits, 1);
  EXPECT_EQ(gv.workspace_bytes, 0u);
  EXPECT_EQ(cuda::plan_w4a8_wgmma(h200, 8, 203, 448, cuda::kW4A8FirstGemvTile, 1, false).ctas, 13);
  EXPECT_EQ(cuda::plan_w4a8_wgmma(h200, 1, 28672, 4096, cuda::kW4A8FirstGemvTile, 1, false).ctas, 396);  // 3 per SM
  EXPECT_THROW(cuda::plan_w4a8_wgmma(h200, 9, 4096, 4096, cuda::kW4A8FirstGemvTile, 1, true), Error);
  EXPECT_EQ(cuda::plan_w4a8_wgmma(h200, 9, 6144, 4096, cuda::w4a8_tile("gemv16"), 1, true).ctas, 264);  // 2 per SM
  EXPECT_THROW(cuda::plan_w4a8_wgmma(h200, 17, 4096, 4096, cuda::w4a8_tile("gemv16"), 1, true), Error);
  // The 64-channel cluster tiles (bn64; the table's entries, the rule at m =
  // 33-64 above, forced plans): 64-channel blocks
  // (grid_n = ceil(n / 64)), one CTA per unit, no workspace; the 128-channel
  // twins' stages and shared memory, half the pair's exchange bytes.
  namespace wg = cuda::w4a8::wgmma;
  const std::pair<const char*, const char*> twins[] = {
      {"wg64x64c", "wg128x64c"}, {"wg64x32c-k256", "wg128x32c-k256"}, {"wg64x64c-k256", "wg128x64c-k256"}};
  for (auto [name, twin_name] : twins) {
    SCOPED_TRACE(name);
    const int t = cuda::w4a8_tile(name), twin = cuda::w4a8_tile(twin_name);
    EXPECT_TRUE(cuda::w4a8_tile_is_cluster(t));
    EXPECT_TRUE(cuda::w4a8_tile_is_bn64(t));
    EXPECT_FALSE(cuda::w4a8_tile_is_bn64(twin));
    EXPECT_TRUE(cuda::w4a8_tile_is_small_cluster(t));
    const wg::TileShape& s = wg::kTiles[t - cuda::kW4A8FirstWgmmaTile];
    const wg::TileShape& s2 = wg::kTiles[twin - cuda::kW4A8FirstWgmmaTile];
    EXPECT_EQ(cuda::w4a8_tile_is_deep(t), s.kd > 1);
    EXPECT_EQ(s.bn(), 64);
    EXPECT_EQ(s2.bn(), 128);
    EXPECT_EQ(cuda::w4a8_tile_tokens(t), cuda::w4a8_tile_tokens(twin));
    for (bool g : {false, true}) {
      const wg::TileShape k = wg::kind_shape(s, g), k2 = wg::kind_shape(s2, g);
      EXPECT_EQ(wg::smem_bytes(k), wg::smem_bytes(k2));
      EXPECT_EQ(2 * wg::pair_recv_bytes(k), wg::pair_recv_bytes(k2));
      EXPECT_EQ(wg::pair_recv_bytes(k), 64 * s.bm * 2);  // half the tile's INT32
      for (int ways : {2, 3, 4, 6}) EXPECT_TRUE(wg::has_push_form(k, ways)) << ways;
    }
    for (int splits : {1, 2, 3}) {
      const cuda::W4A8Plan p = cuda::plan_w4a8_wgmma(h200, 64, 4096, 4096, t, splits, false);
      EXPECT_EQ(p.tile, t);
      EXPECT_EQ(p.splits, splits);
      EXPECT_EQ(p.grid_n, 64);
      EXPECT_EQ(p.grid_m, 64 / s.bm);
      EXPECT_EQ(p.ctas, 64 * p.grid_m * splits);
      EXPECT_EQ(p.workspace_bytes, 0u);
      const cuda::W4A8Plan q = cuda::plan_w4a8_wgmma(h200, 64, 4096, 4096, twin, splits, false);
      EXPECT_EQ(p.ctas, 2 * q.ctas);
    }
    EXPECT_EQ(cuda::plan_w4a8_wgmma(h200, 7, 203, 448, t, 2, true).grid_n, 4);
    EXPECT_EQ(cuda::plan_w4a8_wgmma(h200, 7, 576, 448, t, 2, true).grid_n, 9);
    EXPECT_EQ(cuda::w4a8_plan(std::string(name) + "/3").tile, t);
    const auto o = cuda::parse_w4a8_plan_overrides("4096x4096@64:pc=" + std::string(name) + "/2");
    ASSERT_EQ(o.size(), 1u);
    EXPECT_EQ(o[0].choice.tile, t);
  }
}

// QSERVE_W4A8_PLANS: the parser (the environment is read once per process,
// so the planner hook itself is exercised by the benchmarks, not here).
TEST(GemmW4A8Planner, PlanOverridesParse) {
  const auto o = cuda::parse_w4a8_plan_overrides("4096x4096@1:pc=wg128x8c/3,6144x4096@16:g128=wg256x16a2c-k256/4,");
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].n, 4096);
  EXPECT_EQ(o[0].k, 4096);
  EXPECT_EQ(o[0].bucket, 1);
  EXPECT_FALSE(o[0].g128);
  EXPECT_STREQ(cuda::w4a8_tile_name(o[0].choice.tile), "wg128x8c");
  EXPECT_EQ(o[0].choice.splits, 3);
  EXPECT_EQ(o[1].bucket, 16);
  EXPECT_TRUE(o[1].g128);
  EXPECT_STREQ(cuda::w4a8_tile_name(o[1].choice.tile), "wg256x16a2c-k256");
  EXPECT_TRUE(cuda::parse_w4a8_plan_overrides("").empty());
  const auto sk = cuda::parse_w4a8_plan_overrides("6144x4096@1024:pc=wg128x256/sk");
  ASSERT_EQ(sk.size(), 1u);
  EXPECT_EQ(sk[0].choice.splits, cuda::kW4A8StreamK);
  const auto sk_decode_o = cuda::parse_w4a8_plan_overrides("22016x4096@1:g128=wg256x8a2/sk");
  ASSERT_EQ(sk_decode_o.size(), 1u);
  EXPECT_EQ(sk_decode_o[0].choice.splits, cuda::kW4A8StreamK);
  EXPECT_EQ(cuda::parse_w4a8_plan_overrides("4096x4096@1:g128=gemv8/1").size(), 1u);
  EXPECT_EQ(cuda::parse_w4a8_plan_overrides("4096x14336@16:g128=gemv16d/1").size(), 1u);
  for (const char* bad : {"4096x4096@1:pc=wg128x8c", "4096x4096@8:pc=wg128x8c/2", "4096x4096@1:fp16=wg128x8c/2",
                          "4096x4096@1:pc=nosuch/2", "4096x4096@1:pc=wg128x8c/9",
                          "4096x4096@1:pc=s8_128x128/1", "4096x4096@1:pc=128x8/2", "x4096@1:pc=wg128x8c/2", "4096x4096@1:pc=wg128x8c/0",
                          "4096x4096@1:pc=wg128x8c/sk", "4096x4096@1:pc=wg256x8a2c/sk", "4096x4096@1:pc=wg128x8c/-1",
                          "4096x4096@16:pc=gemv8/1", "4096x4096@1:pc=gemv8/2", "4096x4096@32:pc=gemv16d/1"})
    EXPECT_THROW(cuda::parse_w4a8_plan_overrides(bad), Error) << bad;
  EXPECT_EQ(cuda::w4a8_m_bucket(8), 1);
  EXPECT_EQ(cuda::w4a8_m_bucket(9), 16);
  EXPECT_EQ(cuda::w4a8_m_bucket(512), 512);
  EXPECT_EQ(cuda::w4a8_m_bucket(513), 1024);
  EXPECT_EQ(cuda::w4a8_m_bucket(4097), 8192);
  EXPECT_EQ(cuda::w4a8_m_bucket(8193), 0);
}

// The overrides in force replaced at run time (qserve bench throughput
// --ab-plans), then the table again; a malformed spec changes nothing.
// The kernel-form switches set at run time (the ops cases above, qserve bench
// throughput --ab-switch) and back to the environment's values; a malformed
// assignment changes nothing.
TEST(GemmW4A8Planner, FormSwitchesSetAtRunTime) {
  namespace wg = cuda::w4a8::wgmma;
  cuda::reset_w4a8_switches();
  const bool push = wg::cluster_push(), pair = wg::cluster_pair(), twins = wg::unsplit_twins(),
             apart = wg::push_apart(), async = wg::push_async(), fewer = wg::push_fewer_stages(),
             x3d = wg::x_3d(), first = wg::first_stages();
  cuda::set_w4a8_switch(push ? "QSERVE_W4A8_CLUSTER_PUSH=0" : "QSERVE_W4A8_CLUSTER_PUSH=1");
  EXPECT_EQ(wg::cluster_push(), !push);
  EXPECT_EQ(wg::cluster_pair(), pair);
  cuda::set_w4a8_switch("QSERVE_W4A8_CLUSTER_PAIR=0");
  cuda::set_w4a8_switch("QSERVE_W4A8_UNSPLIT_TWINS=0");
  cuda::set_w4a8_switch(apart ? "QSERVE_W4A8_PUSH_APART=0" : "QSERVE_W4A8_PUSH_APART=1");
  EXPECT_FALSE(wg::cluster_pair());
  EXPECT_FALSE(wg::unsplit_twins());
  EXPECT_EQ(wg::push_apart(), !apart);
  cuda::set_w4a8_switch(async ? "QSERVE_W4A8_PUSH_ASYNC=0" : "QSERVE_W4A8_PUSH_ASYNC=1");
  EXPECT_EQ(wg::push_async(), !async);
  cuda::set_w4a8_switch(fewer ? "QSERVE_W4A8_PUSH_FEWER_STAGES=0" : "QSERVE_W4A8_PUSH_FEWER_STAGES=1");
  EXPECT_EQ(wg::push_fewer_stages(), !fewer);
  cuda::set_w4a8_switch(x3d ? "QSERVE_W4A8_X_3D=0" : "QSERVE_W4A8_X_3D=1");
  EXPECT_EQ(wg::x_3d(), !x3d);
  cuda::set_w4a8_switch(first ? "QSERVE_W4A8_FIRST_STAGES=0" : "QSERVE_W4A8_FIRST_STAGES=1");
  EXPECT_EQ(wg::first_stages(), !first);
  for (const char* bad : {"QSERVE_W4A8_CLUSTER_PUSH", "QSERVE_W4A8_CLUSTER_PUSH=", "QSERVE_W4A8_CLUSTER_PUSH=2",
                          "QSERVE_W4A8_CLUSTER_PUSH=on", "QSERVE_W4A8_PLANS=1", "cluster_push=1", ""}) {
    EXPECT_THROW(cuda::set_w4a8_switch(bad), Error) << bad;
    EXPECT_THROW(cuda::check_w4a8_switch(bad), Error) << bad;
  }
  EXPECT_FALSE(wg::cluster_pair());  // unchanged by the bad ones
  EXPECT_NO_THROW(cuda::check_w4a8_switch("QSERVE_W4A8_CLUSTER_PAIR=1"));
  EXPECT_FALSE(wg::cluster_pair());  // a check sets nothing
  cuda::reset_w4a8_switches();
  EXPECT_EQ(wg::cluster_push(), push);
  EXPECT_EQ(wg::cluster_pair(), pair);
  EXPECT_EQ(wg::unsplit_twins(), twins);
  EXPECT_EQ(wg::push_apart(), apart);
  EXPECT_EQ(wg::push_async(), async);
  EXPECT_EQ(wg::push_fewer_stages(), fewer);
  EXPECT_EQ(wg::x_3d(), x3d);
  EXPECT_EQ(wg::first_stages(), first);
}

TEST(GemmW4A8Planner, PlanOverridesSetAtRunTime) {
  ASSERT_TRUE(cuda::w4a8_plan_overrides().empty()) << "run without QSERVE_W4A8_PLANS";
  const auto table = cuda::measured_w4a8_plan(64, 4096, 4096, true);
  const auto pc_table = cuda::measured_w4a8_plan(64, 4096, 4096, false);
  ASSERT_TRUE(table && pc_table);
  const char* spec = "4096x4096@64:g128=wg256x64c-k256/4";
  ASSERT_NE(cuda::w4a8_tile_name(table->tile), std::string("wg256x64c-k256"));
  cuda::set_w4a8_plan_overrides(spec);
  const auto over = cuda::measured_w4a8_plan(64, 4096, 4096, true);
  ASSERT_TRUE(over);
  EXPECT_STREQ(cuda::w4a8_tile_name(over->tile), "wg256x64c-k256");
  EXPECT_EQ(over->splits, 4);
  EXPECT_EQ(cuda::measured_w4a8_plan(64, 4096, 4096, false)->tile, pc_table->tile);  // the other kind: the table's
  EXPECT_THROW(cuda::set_w4a8_plan_overrides("4096x4096@63:g128=wg128x32c-k256/2"), Error);
  EXPECT_STREQ(cuda::w4a8_tile_name(cuda::measured_w4a8_plan(64, 4096, 4096, true)->tile), "wg256x64c-k256");
  cuda::set_w4a8_plan_overrides("");
  const auto back = cuda::measured_w4a8_plan(64, 4096, 4096, true);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->tile, table->tile);
  EXPECT_EQ(back->splits, table->splits);
}

// The measured table (sm_90, the benchmark's layers at m <= 512) drives both
// planners there, and only there.
TEST(GemmW4A8Planner, MeasuredPlans) {
  cuda::DeviceInfo a100, h200;
  a100.cc_major = 8, a100.sm_count = 108;
  h200.cc_major = 9, h200.sm_count = 132;
  // The bucket rules' exemption: the cluster tiles of up to 64 tokens, not
  // the 128 x 128 one, nor a persistent tile.
  EXPECT_TRUE(cuda::w4a8_tile_is_small_cluster(cuda::w4a8_tile("wg128x64c-k256")));
  EXPECT_TRUE(cuda::w4a8_tile_is_small_cluster(cuda::w4a8_tile("wg256x8a2c")));
  EXPECT_FALSE(cuda::w4a8_tile_is_small_cluster(cuda::w4a8_tile("wg128x128c-k256")));
  EXPECT_FALSE(cuda::w4a8_tile_is_small_cluster(cuda::w4a8_tile("wg128x128")));
  const std::pair<int64_t, int64_t> shapes[] = {{6144, 4096},  {4096, 4096},  {28672, 4096}, {4096, 14336},
                                                {12288, 4096}, {22016, 4096}, {4096, 11008}, {8192, 28672},
                                                {15360, 5120}, {5120, 5120},  {27648, 5120}, {5120, 13824},
                                                {10240, 8192}, {8192, 8192},  {57344, 8192}};
  for (auto [n, k] : shapes)
    for (int64_t m : {1, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 200, 256, 257, 512})
      for (bool g : {false, true}) {
        SCOPED_TRACE("n " + std::to_string(n) + " k " + std::to_string(k) + " m " + std::to_string(m));
        // m of the same bucket gets the plan measured at its top, except above
        // m = 128 where that plan's token tile (not a cluster tile's of up to 64
        // tokens) would pad m's token blocks by over 20% more (then the rule plans).
        const int64_t top = m <= 8 ? 1 : m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : m <= 128 ? 128 : m <= 256 ? 256 : 512;
        const auto top_entry = cuda::measured_w4a8_plan(top, n, k, g);
        ASSERT_TRUE(top_entry);
        const int64_t bm = cuda::w4a8_tile_tokens(top_entry->tile);
        const auto padded = [bm](int64_t t) { return static_cast<double>((t + bm - 1) / bm * bm) / t; };
        const auto entry = cuda::measured_w4a8_plan(m, n, k, g);
        if (m > 128 && !cuda::w4a8_tile_is_small_cluster(top_entry->tile) && padded(m) > 1.2 * padded(top)) {
          EXPECT_FALSE(entry) << cuda::w4a8_tile_name(top_entry->tile);
          continue;
        }
        ASSERT_TRUE(entry);
        EXPECT_TRUE(cuda::w4a8_tile_is_wgmma(entry->tile));
        EXPECT_TRUE(cuda::w4a8_tile_supported(h200, entry->tile));
        EXPECT_EQ(top_entry->tile, entry->tile);
        const cuda::W4A8Plan p = cuda::plan_w4a8(h200, m, n, k, -1, 0, g);
        if (cuda::w4a8_tile_is_gemv(p.tile)) {  // the decode kernels: before the table (m <= 16) or in it
          EXPECT_LE(m, cuda::w4a8_tile_tokens(p.tile));
          continue;
        }
        // Below the bucket's top the rule's 160-224-token tiles take over a
        // entry (not a cluster tile's of up to 64 tokens).
        if (m > 128 && m != top && !cuda::w4a8_tile_is_small_cluster(entry->tile) && p.tile >= cuda::kW4A8FirstMidTile &&
            p.tile < cuda::kW4A8EndMidTile) {
          EXPECT_EQ(cuda::plan_w4a8_wgmma(h200, m, n, k, -1, 0, g).tile, p.tile);
          continue;
        }
        EXPECT_EQ(p.tile, entry->tile);
        EXPECT_EQ(p.splits, entry->splits);  // every entry's split divides its k evenly enough to keep its count
        const cuda::W4A8Plan pw = cuda::plan_w4a8_wgmma(h200, m, n, k, -1, 0, g);
        EXPECT_EQ(pw.tile, entry->tile);
        EXPECT_EQ(pw.splits, entry->splits);
        if (cuda::w4a8_tile_is_cluster(pw.tile))
          EXPECT_EQ(pw.workspace_bytes, 0u);
        else
          EXPECT_GE(pw.workspace_bytes, pw.workspace_bytes_for(m, n));
        EXPECT_FALSE(cuda::w4a8_tile_is_wgmma(cuda::plan_w4a8(a100, m, n, k, -1, 0, g).tile));
      }
  // No entry: other shapes, most layers at m > 512, m > 8192.
  EXPECT_FALSE(cuda::measured_w4a8_plan(64, 576, 576, false));
  EXPECT_FALSE(cuda::measured_w4a8_plan(513, 6144, 4096, false));
  EXPECT_FALSE(cuda::measured_w4a8_plan(8193, 8192, 28672, false));
  // Large m: the rule takes 128 x 256 for both kinds, a tile of fewer tokens
  // where that makes fewer waves of output tiles over the 132 SMs (Llama-3-8B
  // qkv at m = 1024: 240 tiles of 128 x 208, against 384 of 128 x 128 or 192
  // of 128 x 256; o at m = 768: 128 tiles of 128 x 192, one wave), except the
  // two measured 70B down rows.
  for (bool g : {false, true}) {
    EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 4096, 4096, 4096, -1, 0, g).tile), "wg128x256");
    EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 1024, 6144, 4096, -1, 0, g).tile), "wg128x208");
    EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 768, 4096, 4096, -1, 0, g).tile), "wg128x192");
    // No split-K once the output tiles fill the SMs (the 70B down layer at
    // m = 768: 256 tiles of 128 x 192, unsplit; the model alone took 128 x
    // 256 split 2, 1.4x slower).
    const cuda::W4A8Plan d70 = cuda::plan_w4a8(h200, 768, 8192, 28672, -1, 0, g);
    EXPECT_STREQ(cuda::w4a8_tile_name(d70.tile), "wg128x192");
    EXPECT_EQ(d70.splits, 1);
    EXPECT_STREQ(cuda::w4a8_tile_name(cuda::plan_w4a8(h200, 2000, 8192, 28672, -1, 0, g).tile),
                 g ? "wg128x256" : "wg256x128");
  }
  // The sweeps' finding: on the narrow layers at small m, split-K within a
  // cluster (Llama-3-8B o per-channel at m = 16: 6.6 us on 256-channel
  // cluster tiles against 9.1 for the persistent tile with the global split-K
  // fix-up; 5.7 us on the 128-channel cluster tile), on 96 CTAs (split 3),
  // the optimum after another kernel (the model's pattern). The table keeps
  // it; the decode kernel gemv16 went before it at m = 9..16 from round 13,
  // at m = 9..11 only since round 42 (the engine's A/B).
  const auto o = cuda::measured_w4a8_plan(16, 4096, 4096, false);
  ASSERT_TRUE(o);
  EXPECT_STREQ(cuda::w4a8_tile_name(o->tile), "wg128x16c-k256");
  EXPECT_EQ(o->splits, 3);
  for (bool g : {false, true})
    for (int64_t m : {12, 16}) {
      const cuda::W4A8Plan p = cuda::plan_w4a8(h200, m, 4096, 4096, -1, 0, g);
      EXPECT_STREQ(cuda::w4a8_tile_name(p.tile), "wg128x16c-k256") << m << " " << g;
      EXPECT_EQ(p.splits, 3);
    }
}

#endif  // QSERVE_HAVE_CUDA

}  // namespace
}  // namespace qserve
