// W4A8 GEMMs (per-channel, g128) and the library baselines (W8A8 through
// cuBLASLt INT8, FP16 through cuBLASLt) on the GPU against the CPU reference,
// on fresh random inputs every run (the seed is printed on failure).
// The INT32 accumulators must agree exactly; the fp16 outputs too (the
// epilogue is the same FP32 expression on both sides), within 1 ulp to allow
// for a host compiler that contracts into FMA. Outputs are poisoned first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/gemm_w4a8.h"
#include "core/error.h"
#include "core/half.h"
#include "quant/w4a8_repack.h"
#include "quant/weight_format.h"

#ifdef QSERVE_HAVE_CUDA
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/gemm_cublas.h"
#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_launch.h"
#include "backend/cuda/gemm_w4a8_switches.h"
#include "backend/cuda/gemm_w4a8_tile_names.h"
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "backend/cuda/kernels/fused_ops.h"
#include "gemm_test_util.h"
#include "pdl_late_kernel.h"
#endif

namespace qserve {
namespace {

#ifdef QSERVE_HAVE_CUDA

using test::random_activations;
using test::to_device;
using test::ulp_distance;
cuda::CudaContext& context() { return test::gemm_test_context(); }

struct Case {
  bool g128;
  int64_t m, n, k;
  int tile = -1;   // forced tile (-1: the planner's choice)
  int splits = 0;  // forced split-K (0: the planner's choice; kW4A8StreamK: stream-K)
  bool wgmma = false;  // the sm_90a wgmma family (planner's tile unless forced)
  // A kernel-form switch set for this case only (gemm_w4a8_switches.h), e.g.
  // "QSERVE_W4A8_CLUSTER_PUSH=1", or several separated by spaces; nullptr:
  // the process's settings.
  const char* form = nullptr;
};

// The assignments of a case's form ("A=1 B=0" -> {"A=1", "B=0"}).
std::vector<std::string> form_assignments(const char* form) {
  std::vector<std::string> out;
  std::istringstream in(form);
  for (std::string a; in >> a;) out.push_back(a);
  return out;
}

// "QSERVE_W4A8_CLUSTER_PUSH=1" -> "_cluster_push1" (one such part per assignment).
std::string form_suffix(const char* form) {
  std::string s;
  for (const std::string& a : form_assignments(form)) {
    s += "_";
    for (size_t i = std::strlen("QSERVE_W4A8_"); i < a.size(); ++i)
      if (a[i] != '=') s += static_cast<char>(std::tolower(static_cast<unsigned char>(a[i])));
  }
  return s;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string s = std::string(c.g128 ? "g128" : "pc") + "_m" + std::to_string(c.m) + "_n" + std::to_string(c.n) +
                  "_k" + std::to_string(c.k);
  if (c.wgmma) s += "_wgmma";
  if (c.tile >= 0) s += "_tile" + std::to_string(c.tile);
  if (c.splits > 0) s += "_split" + std::to_string(c.splits);
  if (c.splits == cuda::kW4A8StreamK) s += "_sk";
  if (c.form) s += form_suffix(c.form);
  return s;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const std::initializer_list<int64_t> ms = {1, 2, 7, 16, 33, 64, 128, 255, 1024, 4097};
  // Real layers, Llama-3-8B qkv (6144 x 4096) and down (4096 x 14336), at
  // `m_list`, both kinds, the planner's plans (of the wgmma family, with `form`).
  auto on_real_layers = [&](std::initializer_list<int64_t> m_list, bool wgmma, const char* form) {
    for (bool g : {false, true})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 14336}})
        for (int64_t m : m_list) cases.push_back({g, m, n, k, -1, 0, wgmma, form});
  };
  on_real_layers(ms, false, nullptr);
  // The small default model's layers (k = 576 has a partial last group) and
  // odd multiples of the tile sizes, n not a multiple of 16.
  for (bool g : {false, true})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{576, 576}, {192, 576}, {1536, 576}, {576, 1536}, {200, 448},
                        {640, 320}, {1408, 2880}})
      for (int64_t m : {1, 7, 33, 255, 1031}) cases.push_back({g, m, n, k});
  // Every tile configuration, with and without split-K.
  for (bool g : {false, true})
    for (int tile = 0; tile < 6; ++tile)
      for (int splits : {1, 3})
        for (int64_t m : {1, 37, 300}) cases.push_back({g, m, 640, 576, tile, splits});
  // The sm_90a wgmma family (skipped on other GPUs): the same matrix, then
  // each of its tiles with and without split-K.
  on_real_layers(ms, true, nullptr);
  for (bool g : {false, true})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{576, 576}, {192, 576}, {1536, 576}, {576, 1536}, {200, 448},
                        {640, 320}, {1408, 2880}})
      for (int64_t m : {1, 7, 33, 255, 1031}) cases.push_back({g, m, n, k, -1, 0, true});
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstWgmmaTile; tile < cuda::kW4A8FirstGemvTile; ++tile)
      for (int splits : {1, 3})
        for (int64_t m : {1, 37, 300}) cases.push_back({g, m, 640, 576, tile, splits, true});
  // Two splits on every cluster tile: the pair form (tiles of >= 16 tokens;
  // the default) and the cluster reduction (QSERVE_W4A8_CLUSTER_PAIR=0).
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstClusterTile; tile < cuda::kW4A8EndClusterTile; ++tile)
      for (int64_t m : {37, 300})
        for (const char* form : {"QSERVE_W4A8_CLUSTER_PAIR=1", "QSERVE_W4A8_CLUSTER_PAIR=0"})
          cases.push_back({g, m, 640, 576, tile, 2, true, form});
  // Three, four and six splits on every cluster tile, k of 12 blocks, in both
  // forms: the cluster reduction (QSERVE_W4A8_CLUSTER_PUSH=0) and the push
  // form where the tile has one (=1; owners of 1-4 token groups; at 16
  // tokens ranks that only send; the cluster reduction elsewhere).
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstClusterTile; tile < cuda::kW4A8EndClusterTile; ++tile)
      for (int splits : {3, 4, 6})
        for (int64_t m : {37, 300})
          for (const char* form : {"QSERVE_W4A8_CLUSTER_PUSH=1", "QSERVE_W4A8_CLUSTER_PUSH=0"})
            cases.push_back({g, m, 640, 1536, tile, splits, true, form});
  // The push forms with their received parts in the stages
  // (QSERVE_W4A8_PUSH_APART=0) on every cluster tile at 2 and 4 splits: the
  // default puts them apart wherever the shared memory holds them
  // (push_recv_apart), so the cases above run that form on those tiles.
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstClusterTile; tile < cuda::kW4A8EndClusterTile; ++tile)
      for (int splits : {2, 4})
        for (int64_t m : {37, 300}) cases.push_back({g, m, 640, 1536, tile, splits, true, "QSERVE_W4A8_PUSH_APART=0"});
  // The push forms with their parts published by a release cluster barrier
  // (QSERVE_W4A8_PUSH_ASYNC=0) on every cluster tile at 2, 4 and 6 splits:
  // the default sends them by st.async onto the owner's mbarrier, so the
  // cases above run that form (apart, and in the stages: _push_apart0).
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstClusterTile; tile < cuda::kW4A8EndClusterTile; ++tile)
      for (int splits : {2, 4, 6})
        for (int64_t m : {37, 300}) cases.push_back({g, m, 640, 1536, tile, splits, true, "QSERVE_W4A8_PUSH_ASYNC=0"});
  // The push forms of 3 or more splits whose parts do not fit beside the
  // stages run with one stage fewer, the parts apart, by default
  // (has_push_fewer_form; the cases above run that form there, with st.async
  // and, _push_async0, without); here their in-stage form
  // (QSERVE_W4A8_PUSH_FEWER_STAGES=0), with st.async and without.
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstClusterTile; tile < cuda::kW4A8EndClusterTile; ++tile)
      for (int splits : {3, 4, 6}) {
        namespace wg = cuda::w4a8::wgmma;
        if (!wg::has_push_fewer_form(wg::kind_shape(wg::kTiles[tile - cuda::kW4A8FirstWgmmaTile], g), splits)) continue;
        for (int64_t m : {37, 300}) {
          cases.push_back({g, m, 640, 1536, tile, splits, true, "QSERVE_W4A8_PUSH_FEWER_STAGES=0"});
          if (m == 37) cases.push_back({g, m, 640, 1536, tile, splits, true, "QSERVE_W4A8_PUSH_FEWER_STAGES=0 QSERVE_W4A8_PUSH_ASYNC=0"});
        }
      }
  // The deep-stage tiles (kd > 1) with a stage's activation blocks in one 3-D
  // box (QSERVE_W4A8_X_3D=1; k % 128 == 0): unsplit (the twins), the pair,
  // three splits (push forms), and with k % 128 == 64 (k = 1600), where the
  // launch keeps the 2-D boxes; then the planner's plans on two real layers.
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstClusterTile; tile < cuda::kW4A8EndClusterTile; ++tile) {
      namespace wg = cuda::w4a8::wgmma;
      if (wg::kTiles[tile - cuda::kW4A8FirstWgmmaTile].kd == 1) continue;
      for (int splits : {1, 2, 3})
        for (int64_t m : {37, 300}) cases.push_back({g, m, 640, 1536, tile, splits, true, "QSERVE_W4A8_X_3D=1"});
      cases.push_back({g, 37, 640, 1600, tile, 2, true, "QSERVE_W4A8_X_3D=1"});
    }
  on_real_layers({16, 33, 64}, true, "QSERVE_W4A8_X_3D=1");
  // The first stages' weights ahead of the rest (QSERVE_W4A8_FIRST_STAGES,
  // the default since round 42: the producer waits for stage 0 before
  // requesting stage 4's weights; the cases above run it) switched off, on
  // every wgmma tile that takes it (deep-stage register-A W4, one CTA per SM:
  // not the kd = 1, s8 / pd tiles, the multicast pair, the two-per-SM tiles,
  // whose cases above are the same kernels), k = 2880 (22.5 blocks: enough
  // stages for the wait at every depth, and a half block at the end),
  // unsplit and at 2 splits; then the planner's plans on two real layers.
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstWgmmaTile; tile < cuda::kW4A8FirstGemvTile; ++tile) {
      namespace wg = cuda::w4a8::wgmma;
      const wg::TileShape& t = wg::kTiles[tile - cuda::kW4A8FirstWgmmaTile];
      if (t.s8 || t.pd || t.mc || t.occ != 1 || t.kd == 1) continue;
      cases.push_back({g, 37, 640, 2880, tile, 1, true, "QSERVE_W4A8_FIRST_STAGES=0"});
      cases.push_back({g, 300, 640, 2880, tile, 1, true, "QSERVE_W4A8_FIRST_STAGES=0"});
      cases.push_back({g, 37, 640, 2880, tile, 2, true, "QSERVE_W4A8_FIRST_STAGES=0"});
    }
  on_real_layers({16, 33, 64, 1024}, true, "QSERVE_W4A8_FIRST_STAGES=0");
  // The measured plans (sm_90) of the other benchmark layers, through the
  // top-level planner: Llama-3-8B o and gate_up, Llama-2-7B qkv, gate_up, down
  // (m = 7: the decode rule's gemv8, or the table's m <= 8 bucket where the
  // rule leaves it: gate_up, Llama-2-7B down).
  for (bool g : {false, true})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{4096, 4096}, {28672, 4096}, {12288, 4096}, {22016, 4096},
                        {4096, 11008}})
      for (int64_t m : {7, 16, 32, 64, 255}) cases.push_back({g, m, n, k});
  for (bool g : {false, true}) cases.push_back({g, 300, 4096, 4096});  // the m <= 512 bucket
  // The Llama-2-13B and Llama-2-70B entries of the table, through the top-level planner.
  for (bool g : {false, true})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{5120, 5120}, {5120, 13824}, {10240, 8192}, {8192, 8192}})
      for (int64_t m : {5, 16, 32, 64, 100}) cases.push_back({g, m, n, k});
  // Llama-2-70B down (k = 28672) in the m = 17-32 bucket: the 128 x 32 cluster
  // tiles with 2 splits of 14336 (round 23), at the bucket's top and inside it;
  // Llama-2-13B qkv there (its round-23 entry).
  for (bool g : {false, true})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{8192, 28672}, {15360, 5120}})
      for (int64_t m : {20, 32}) cases.push_back({g, m, n, k});
  // The INT8-weight tiles (dequantization pass + wgmma with both operands in
  // shared memory), forced: a real layer at every m, the long-k layer at
  // large m, and each tile on odd shapes (n not a multiple of the tile or of
  // 16, k % 128 == 64) with the planner's split-K. The loop over every wgmma
  // tile above runs them with split-K 1 and 3 as well.
  for (bool g : {false, true}) {
    for (int64_t m : ms) cases.push_back({g, m, 6144, 4096, cuda::kW4A8FirstS8Tile, 0, true});
    for (int64_t m : {33, 1024}) cases.push_back({g, m, 4096, 14336, cuda::w4a8_tile("s8_128x256"), 0, true});
    for (int tile = cuda::kW4A8FirstS8Tile; tile < cuda::kW4A8FirstPdTile; ++tile) {
      for (int64_t m : {7, 255, 1031}) cases.push_back({g, m, 1408, 2880, tile, 0, true});
      for (int64_t m : {2, 129}) cases.push_back({g, m, 203, 448, tile, 0, true});
    }
  }
  // The producer-dequantizing tiles (W4 weights unpacked into INT8 tiles in
  // shared memory by the producer warpgroup), forced, likewise: a real layer
  // at mid and large m, the long-k layer, each tile on the odd shapes (k %
  // 128 == 64: a half last stage; n not a multiple of the tile or of 16: a
  // missing 128-channel block and padded rows); split-K 1 and 3 above.
  for (bool g : {false, true}) {
    for (int64_t m : {255, 1024, 4097}) cases.push_back({g, m, 6144, 4096, cuda::kW4A8FirstPdTile, 0, true});
    for (int64_t m : {33, 1024}) cases.push_back({g, m, 4096, 14336, cuda::w4a8_tile("pd_128x256"), 0, true});
    cases.push_back({g, 1024, 6144, 4096, cuda::w4a8_tile("pd_128x128"), 0, true});
    for (int tile = cuda::kW4A8FirstPdTile; tile < cuda::kW4A8FirstClusterTile; ++tile) {
      for (int64_t m : {7, 255, 1031}) cases.push_back({g, m, 1408, 2880, tile, 0, true});
      for (int64_t m : {2, 129}) cases.push_back({g, m, 203, 448, tile, 0, true});
    }
  }
  // The cluster tiles (split-K summed through distributed shared memory),
  // forced: a real layer at decode and mid m with the largest cluster (8),
  // the long-k layer with an uneven one (k = 14336: 112 stages, 23 per split
  // -> 5 splits), and each tile on the odd shapes (k % 128 == 64, n not a
  // multiple of the tile or of 4) with 2 and 7 splits; 1 and 3 above.
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstClusterTile; tile < cuda::kW4A8EndClusterTile; ++tile) {
      for (int64_t m : {1, 16, 33, 64, 130}) cases.push_back({g, m, 6144, 4096, tile, 8, true});
      cases.push_back({g, 7, 4096, 14336, tile, 5, true});
      for (int64_t m : {2, 129}) cases.push_back({g, m, 203, 448, tile, 2, true});
      cases.push_back({g, 45, 1410, 2880, tile, 7, true});
    }
  // The 64-channel cluster tiles (bn64: consumer warpgroup 0 computes half a
  // 128-channel block of the repacked weights, warpgroup 1 idles), beyond the
  // loops over every cluster tile above (640 = 10 blocks of 64, 203 = 3 x 64 +
  // 11, 1410 = 22 x 64 + 2, 6144, 4096): n of an odd count of 64-channel
  // blocks (192, 576: the last 128-channel block's second half past n) and
  // not a multiple of 16 (203: block 1's second half, 11 channels inside n),
  // k % 128 == 64 (1600: a half last block; 13 blocks, so that 2 and 3
  // splits end inside a 256-deep stage), unsplit (the twin), the pair and 3
  // splits (push form), then the same splits through the cluster reduction
  // (QSERVE_W4A8_CLUSTER_PAIR=0 / _PUSH=0), and a cluster of one
  // (QSERVE_W4A8_UNSPLIT_TWINS=0).
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstBn64Tile; tile < cuda::kW4A8EndClusterTile; ++tile)
      for (int64_t n : {192, 203, 576}) {
        for (int splits : {1, 2, 3}) {
          for (int64_t m : {33, 64}) cases.push_back({g, m, n, 1600, tile, splits, true});
          if (splits > 1)
            cases.push_back({g, 64, n, 1600, tile, splits, true,
                             splits == 2 ? "QSERVE_W4A8_CLUSTER_PAIR=0" : "QSERVE_W4A8_CLUSTER_PUSH=0"});
        }
        cases.push_back({g, 33, n, 1600, tile, 1, true, "QSERVE_W4A8_UNSPLIT_TWINS=0"});
      }
  // The 128 x 128 cluster tile at m = 256 on a real layer (2 and 4 splits, its
  // table's use) and with rows past m.
  for (bool g : {false, true})
    for (int splits : {2, 4}) {
      cases.push_back({g, 256, 4096, 4096, cuda::w4a8_tile("wg128x128c-k256"), splits, true});
      cases.push_back({g, 200, 4096, 14336, cuda::w4a8_tile("wg128x128c-k256"), splits, true});
    }
  // The deep-stage tiles: a split of 3 blocks (k = 384, one split: a partial
  // first stage), and splits ending inside a stage (k = 14336 in 5 splits of
  // 23 blocks; k = 2944 in 6 splits of 4, 4, 4, 4, 4, 3 blocks) above.
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstDeepTile; tile < cuda::kW4A8EndClusterTile; ++tile)
      for (int64_t m : {3, 17}) cases.push_back({g, m, 203, 384, tile, 1, true});
  // Stream-K on the large W4 tiles: a real layer where the tiles fill
  // 0.73 waves (m = 512 on 128 x 256: 96 tiles of 32 stages, up to 3 pieces
  // per tile), 2.9 and 5.8 waves (m = 1024 / 4097); the odd shapes (k % 128
  // == 64, n not a multiple of the tile or of 8), and a problem of fewer
  // stages than SMs (200 x 448 at m = 2: 8 stages, one CTA each, 4 pieces
  // per tile).
  // The top-level planner on the long-k down layers at m = 129-256: split-K
  // pieces (Llama-3-8B at m = 129: the rule's wg128x160/4, below its table
  // entry's padding limit), stream-K (Llama-2-13B
  // both kinds in the table) and the rule's split-K outside the table
  // (4096 x 12288).
  for (bool g : {false, true}) {
    cases.push_back({g, 129, 4096, 14336});
    cases.push_back({g, 200, 5120, 13824});
    cases.push_back({g, 200, 4096, 12288});
  }
  // The decode tiles' stream-K (wg256x8 .. wg256x64, wg256x8a2 ..
  // wg256x32a2): m = 1, 7 and one token block and 5 (a partial second
  // block) on the odd shapes; Llama-2-7B gate_up (86 tiles of 32 stages on
  // 132 CTAs: most tiles cut in two or three pieces) at m = 1 and a block +
  // 5; Llama-3-8B qkv at m = 33.
  const int large_sk = cuda::kW4A8FirstWgmmaTile + cuda::w4a8::wgmma::kFirstLargeStreamKTile,
            large_sk_end = cuda::kW4A8FirstWgmmaTile + cuda::w4a8::wgmma::kEndLargeStreamKTile;
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstStreamKTile; tile < cuda::kW4A8EndStreamKTile; ++tile) {
      if (tile >= large_sk && tile < large_sk_end) {
        for (int64_t m : {7, 255, 1031}) cases.push_back({g, m, 1408, 2880, tile, cuda::kW4A8StreamK, true});
        for (int64_t m : {2, 129}) cases.push_back({g, m, 203, 448, tile, cuda::kW4A8StreamK, true});
        for (int64_t m : {512, 1024, 4097}) cases.push_back({g, m, 6144, 4096, tile, cuda::kW4A8StreamK, true});
        continue;
      }
      const int64_t block_plus = cuda::w4a8_tile_tokens(tile) + 5;
      for (int64_t m : {int64_t{1}, int64_t{7}, block_plus})
        cases.push_back({g, m, 1408, 2880, tile, cuda::kW4A8StreamK, true});
      for (int64_t m : {2, 17}) cases.push_back({g, m, 203, 448, tile, cuda::kW4A8StreamK, true});
      for (int64_t m : {int64_t{1}, block_plus}) cases.push_back({g, m, 22016, 4096, tile, cuda::kW4A8StreamK, true});
      cases.push_back({g, 33, 6144, 4096, tile, cuda::kW4A8StreamK, true});
    }
  // The 160-224-token tiles, forced: a real layer at mid and large m (the
  // last token block partial: 1024 = 4 x 208 + 192, 4097), and the odd shapes
  // (k % 128 == 64, n not a multiple of the tile or of 8: the epilogue's
  // partial 16-B pieces) with split-K 1 and 2.
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstMidTile; tile < cuda::kW4A8EndMidTile; ++tile) {
      for (int64_t m : {1024, 4097}) cases.push_back({g, m, 6144, 4096, tile, 1, true});
      for (int64_t m : {7, 255, 1031}) cases.push_back({g, m, 1408, 2880, tile, 2, true});
      for (int64_t m : {2, 229}) cases.push_back({g, m, 203, 448, tile, 1, true});
    }
  // The multicast pair, forced: a real layer at mid and large m (more pairs
  // than clusters: each cluster walks several), with split-K; the odd shapes
  // (an odd count of n blocks, so that the last pair's second CTA has no
  // channels: 1408 = 11 x 128, and 640 = 5 x 128 above with split 1 and 3;
  // k % 128 == 64; rows past m in one or both halves of a token block).
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstMcTile; tile < cuda::kW4A8FirstGemvTile; ++tile) {
      for (int64_t m : {256, 1024, 4097}) cases.push_back({g, m, 6144, 4096, tile, 1, true});
      cases.push_back({g, 300, 4096, 14336, tile, 2, true});
      for (int64_t m : {7, 255, 1031}) cases.push_back({g, m, 1408, 2880, tile, 2, true});
      for (int64_t m : {2, 229}) cases.push_back({g, m, 203, 448, tile, 1, true});
    }
  // The decode kernel (one CTA per 16 channels), forced: real layers (the
  // long-k down layer: 28 k64 blocks per warp, seven chunks), every m up to
  // the tile's tokens at its edges, the odd shapes (n not a multiple of 16,
  // k % 128 == 64: a g128 group of one k64 block; k / 64 not a multiple of
  // the 8 warps).
  // The resident kernels (gemv8r / 16r / 32r) where their rows fit in shared
  // memory (not 16 / 32 tokens at k = 14336), and the Llama-2-7B down layer
  // (k = 11008: 172 blocks over 16 warps, 10 or 11 each).
  const cuda::DeviceInfo sm90;  // (no figures: sm_90's shared memory)
  for (bool g : {false, true})
    for (int tile = cuda::kW4A8FirstGemvTile; tile < cuda::kW4A8TileCount; ++tile) {
      const int64_t tokens = cuda::w4a8_tile_tokens(tile);
      for (int64_t m : {int64_t{1}, int64_t{4}, int64_t{9}, int64_t{17}, tokens - 1, tokens})
        if (m <= tokens) cases.push_back({g, m, 6144, 4096, tile, 1, true});
      if (cuda::w4a8_gemv_fits(sm90, tile, 14336, g)) cases.push_back({g, tokens, 4096, 14336, tile, 1, true});
      if (cuda::w4a8_gemv_kernel(tile) == cuda::w4a8::gemv::Kernel::kGemv16Resident)
        cases.push_back({g, tokens - 2, 4096, 11008, tile, 1, true});
      for (int64_t m : {int64_t{2}, tokens}) cases.push_back({g, m, 203, 448, tile, 1, true});
      cases.push_back({g, tokens - 3, 1408, 2880, tile, 1, true});
      cases.push_back({g, 5, 200, 64, tile, 1, true});
      // More tiles than resident CTAs (396 on 132 SMs): the CTAs walk them,
      // two each, or one or two (7000 / 16 = 437.5 tiles).
      cases.push_back({g, 3, 12288, 4096, tile, 1, true});
      cases.push_back({g, tokens, 7000, 576, tile, 1, true});
    }
  // n not a multiple of 8: the staged epilogue's partial 16-B pieces.
  for (bool g : {false, true})
    for (bool wg : {false, true})
      for (int64_t m : {7, 255}) cases.push_back({g, m, 203, 448, -1, 0, wg});
  return cases;
}

std::vector<float> random_weights(int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(n * k);
  for (auto& v : w) v = d(rng);
  std::uniform_int_distribution<int64_t> pick(0, n * k - 1);
  for (int64_t i = 0; i < n; ++i) w[pick(rng)] *= 20.0f;  // a few outliers
  return w;
}

class GpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  }
};

class GemmW4A8 : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  }
};

TEST_P(GemmW4A8, MatchesCpuReference) {
  const Case c = GetParam();
  // The case's kernel form, back to the process's settings at the end.
  struct FormScope {
    explicit FormScope(const char* form) {
      if (form)
        for (const std::string& a : form_assignments(form)) cuda::set_w4a8_switch(a);
    }
    ~FormScope() { cuda::reset_w4a8_switches(); }
  } form_scope(c.form);
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto& ctx = context();
  const cudaStream_t stream = ctx.stream();

  const std::vector<float> wf = random_weights(c.n, c.k, rng);
  const test::QuantizedActivations a = random_activations(c.m, c.k, rng);
  std::vector<int32_t> acc_ref(c.m * c.n);
  std::vector<uint16_t> y_ref(c.m * c.n);
  cuda::W4A8DeviceWeights dw;
  if (c.g128) {
    const auto w = quant::quantize_w4_g128(wf, c.n, c.k);
    cpu::gemm_w4a8_g128(a.q.data(), a.s_x.data(), c.m, w, acc_ref.data(), y_ref.data());
    dw = cuda::upload_w4a8(w);
  } else {
    const auto w = quant::quantize_w4_per_channel(wf, c.n, c.k);
    cpu::gemm_w4a8_per_channel(a.q.data(), a.s_x.data(), a.a_sum.data(), c.m, w, acc_ref.data(), y_ref.data());
    dw = cuda::upload_w4a8(w);
  }
  if (c.wgmma && !cuda::w4a8_wgmma_supported(ctx.info())) GTEST_SKIP() << "skipped: the wgmma kernels need sm_90";
  const cuda::W4A8Plan plan =
      c.wgmma ? cuda::plan_w4a8_wgmma(ctx.info(), c.m, c.n, c.k, c.tile, c.splits, c.g128)
              : cuda::plan_w4a8(ctx.info(), dw, c.m, c.tile, c.splits);  // the top-level choice
  RecordProperty("tile", cuda::w4a8_tile_name(plan.tile));
  RecordProperty("splits", plan.splits);
  auto x = to_device(a.q), sx = to_device(a.s_x), asum = to_device(a.a_sum), xsum = to_device(a.x_sum);
  cuda::DeviceBuffer ws(std::max<size_t>(plan.workspace_bytes, 4));
  QS_CUDA_CHECK(cudaMemset(ws.data(), 0, ws.size()));
  cuda::DeviceBuffer acc(c.m * c.n * 4), y(c.m * c.n * 2);
  // The memset above goes through the legacy default stream, which the
  // context's non-blocking stream does not wait for: without this, a late
  // memset could zero split-K counters or partials under the GEMM.
  QS_CUDA_CHECK(cudaDeviceSynchronize());

  cuda::W4A8Args args;
  args.x = x.as<int8_t>();
  args.s_x = sx.as<__half>();
  args.a_sum = asum.as<__half>();
  args.x_sum = xsum.as<int32_t>();
  args.m = c.m;

  // 1. Exact accumulators (poisoned with 0x7f7f7f7f first).
  QS_CUDA_CHECK(cudaMemsetAsync(acc.data(), 0x7f, acc.size(), stream));
  args.acc_out = acc.as<int32_t>();
  cuda::gemm_w4a8(dw, args, plan, ws.data(), stream);
  std::vector<int32_t> acc_gpu(c.m * c.n);
  QS_CUDA_CHECK(cudaStreamSynchronize(stream));
  acc.download(acc_gpu.data(), acc.size());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < c.m * c.n; ++i)
    if (acc_gpu[i] != acc_ref[i] && bad++ == 0) first = i;
  ASSERT_EQ(bad, 0) << "tile " << cuda::w4a8_tile_name(plan.tile) << " splits " << plan.splits << ": first at (t "
                    << first / c.n << ", o " << first % c.n << "): " << acc_gpu[first] << " vs " << acc_ref[first];

  // 2. FP16 output (poisoned with NaN), run twice: the split-K counters must
  // have been left at zero by the first run.
  args.acc_out = nullptr;
  args.y = y.as<__half>();
  std::vector<uint16_t> y_gpu(c.m * c.n);
  for (int rep = 0; rep < 2; ++rep) {
    QS_CUDA_CHECK(cudaMemsetAsync(y.data(), 0xff, y.size(), stream));
    cuda::gemm_w4a8(dw, args, plan, ws.data(), stream);
    QS_CUDA_CHECK(cudaStreamSynchronize(stream));
    y.download(y_gpu.data(), y.size());
    int64_t off = 0, differ = 0;
    for (int64_t i = 0; i < c.m * c.n; ++i) {
      const int d = ulp_distance(y_gpu[i], y_ref[i]);
      if (std::isnan(half_to_float(y_gpu[i])) || d > 1) {
        if (off++ == 0) first = i;
      }
      differ += d != 0;
    }
    ASSERT_EQ(off, 0) << "fp16 output, run " << rep << ": first at (t " << first / c.n << ", o " << first % c.n
                      << "): " << half_to_float(y_gpu[first]) << " vs " << half_to_float(y_ref[first]);
    RecordProperty("fp16_not_bitwise", static_cast<int>(differ));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, GemmW4A8, testing::ValuesIn(all_cases()), case_name);

// The programmatic-launch cases' GEMM arguments: INT8 rows x, their scales
// and sums on the device, the INT32 accumulators into acc.
cuda::W4A8Args pdl_gemm_args(const cuda::DeviceBuffer& x, const cuda::DeviceBuffer& s_x,
                             const cuda::DeviceBuffer& a_sum, const cuda::DeviceBuffer& x_sum, int64_t m,
                             const cuda::DeviceBuffer& acc) {
  cuda::W4A8Args args;
  args.x = x.as<int8_t>();
  args.s_x = s_x.as<__half>();
  args.a_sum = a_sum.as<__half>();
  args.x_sum = x_sum.as<int32_t>();
  args.m = m;
  args.acc_out = acc.as<int32_t>();
  return args;
}

// After a programmatic-launch case's stream: every accumulator equals the
// reference (`suspect`: what a difference would mean), and the slow first
// kernel's snapshot of the output buffer still holds its poison 0x5a (the
// GEMM did not write it before that kernel read it).
void expect_waited(const cuda::DeviceBuffer& acc, const cuda::DeviceBuffer& snapshot,
                   const std::vector<int32_t>& acc_ref, const std::string& suspect) {
  std::vector<int32_t> got(acc_ref.size()), seen(acc_ref.size());
  acc.download(got.data(), got.size() * sizeof(int32_t));
  snapshot.download(seen.data(), seen.size() * sizeof(int32_t));
  int64_t bad = 0, early = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bad += got[i] != acc_ref[i];
    early += seen[i] != 0x5a5a5a5a;
  }
  EXPECT_EQ(bad, 0) << "accumulators that differ from the reference (" << suspect << ")";
  EXPECT_EQ(early, 0) << "outputs written before the first kernel read them";
}

// Programmatic dependent launch (src/backend/cuda/kernels/pdl.cuh): the GEMM
// may start while the kernel before it, which lets its dependents launch at
// once and then sleeps, has still to write the GEMM's activations (read after
// write) and to read the buffer the GEMM writes (write after read). The GEMM
// must see the new activations and must not overwrite the buffer early.
TEST(GemmW4A8Pdl, WaitsForThePreviousKernel) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  auto& ctx = context();
  const cudaStream_t stream = ctx.stream();
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  RecordProperty("pdl", cuda::pdl_enabled(ctx.info()) ? "on" : "off (plain launches)");
  const int64_t n = 1536, k = 1024;
  const std::vector<float> wf = random_weights(n, k, rng);
  const auto wg = quant::quantize_w4_g128(wf, n, k);
  const auto wp = quant::quantize_w4_per_channel(wf, n, k);
  const cuda::W4A8DeviceWeights dg = cuda::upload_w4a8(wg), dp = cuda::upload_w4a8(wp);
  struct PdlCase {
    bool g128;
    int64_t m;
    int family;  // 0: top-level plan, 1: mma.sync with split-K 3, 2: the persistent wgmma tile
                 // 256 x 32 with split-K 3 (the global fix-up: counters and partials),
                 // 3: the first INT8-weight tile with split-K 3 (after the dequantization pass),
                 // 4: the first producer-dequantizing tile with split-K 3,
                 // 5: the cluster tile 256 x 32 with 3 splits (a cluster of 3),
                 // 6: the multicast pair of 128 x 256 with split-K 3,
                 // 7-10: the decode tiles gemv8 (m <= 8), gemv16 (m <= 16), gemv8d
                 // (m <= 8, two chunks of weights ahead), gemv16d (m <= 16, likewise),
                 // 11-13: the resident ones gemv8r, gemv16r, gemv32r
  };
  const bool hopper = cuda::w4a8_wgmma_supported(ctx.info());
  for (const PdlCase c : {PdlCase{false, 5, 0}, PdlCase{true, 5, 0}, PdlCase{false, 64, 0}, PdlCase{true, 300, 0},
                          PdlCase{false, 33, 1}, PdlCase{true, 17, 1}, PdlCase{false, 40, 2}, PdlCase{true, 129, 2},
                          PdlCase{false, 70, 3}, PdlCase{true, 300, 3}, PdlCase{false, 70, 4},
                          PdlCase{true, 300, 4}, PdlCase{false, 5, 5}, PdlCase{true, 40, 5},
                          PdlCase{false, 300, 6}, PdlCase{true, 129, 6}, PdlCase{false, 5, 7},
                          PdlCase{true, 8, 7}, PdlCase{false, 16, 8}, PdlCase{true, 11, 8},
                          PdlCase{false, 1, 9}, PdlCase{true, 6, 9}, PdlCase{false, 13, 10},
                          PdlCase{true, 16, 10}, PdlCase{false, 3, 11}, PdlCase{true, 8, 11},
                          PdlCase{false, 16, 12}, PdlCase{true, 10, 12}, PdlCase{false, 29, 13},
                          PdlCase{true, 32, 13}}) {
    if (c.family >= 2 && !hopper) continue;
    SCOPED_TRACE(std::string(c.g128 ? "g128" : "per-channel") + " m " + std::to_string(c.m) + " family " +
                 std::to_string(c.family));
    const cuda::W4A8DeviceWeights& dw = c.g128 ? dg : dp;
    const cuda::W4A8Plan plan = c.family == 1   ? cuda::plan_w4a8_mma(ctx.info(), c.m, n, k, -1, 3, c.g128)
                                : c.family == 2 ? cuda::plan_w4a8_wgmma(ctx.info(), c.m, n, k, cuda::w4a8_tile("wg256x32"), 3, c.g128)
                                : c.family == 3 ? cuda::plan_w4a8_wgmma(ctx.info(), c.m, n, k, cuda::kW4A8FirstS8Tile, 3, c.g128)
                                : c.family == 4 ? cuda::plan_w4a8_wgmma(ctx.info(), c.m, n, k, cuda::kW4A8FirstPdTile, 3, c.g128)
                                : c.family == 5 ? cuda::plan_w4a8_wgmma(ctx.info(), c.m, n, k, cuda::w4a8_tile("wg256x32c"), 3, c.g128)
                                : c.family == 6 ? cuda::plan_w4a8_wgmma(ctx.info(), c.m, n, k, cuda::kW4A8FirstMcTile, 3, c.g128)
                                : c.family >= 7 ? cuda::plan_w4a8_wgmma(ctx.info(), c.m, n, k, cuda::kW4A8FirstGemvTile + c.family - 7, 1, c.g128)
                                                : cuda::plan_w4a8(ctx.info(), dw, c.m);
    const test::QuantizedActivations a = random_activations(c.m, k, rng);
    std::vector<int32_t> acc_ref(c.m * n);
    std::vector<uint16_t> y_ref(c.m * n);
    if (c.g128)
      cpu::gemm_w4a8_g128(a.q.data(), a.s_x.data(), c.m, wg, acc_ref.data(), y_ref.data());
    else
      cpu::gemm_w4a8_per_channel(a.q.data(), a.s_x.data(), a.a_sum.data(), c.m, wp, acc_ref.data(), y_ref.data());
    auto x_final = to_device(a.q), sx = to_device(a.s_x), asum = to_device(a.a_sum), xsum = to_device(a.x_sum);
    cuda::DeviceBuffer x(c.m * k), acc(c.m * n * 4), snapshot(c.m * n * 4);
    cuda::DeviceBuffer ws(std::max<size_t>(plan.workspace_bytes, 4));
    QS_CUDA_CHECK(cudaMemset(ws.data(), 0, ws.size()));
    QS_CUDA_CHECK(cudaMemset(x.data(), 0, x.size()));           // stale activations: all zero
    QS_CUDA_CHECK(cudaMemset(acc.data(), 0x5a, acc.size()));    // what the slow kernel must read
    QS_CUDA_CHECK(cudaMemset(snapshot.data(), 0xff, snapshot.size()));
    QS_CUDA_CHECK(cudaDeviceSynchronize());  // the legacy-stream setup lands before the stream's kernels
    test::launch_late_copies(x_final.data(), x.data(), x.size(), acc.data(), snapshot.data(), snapshot.size(), 200,
                             stream);
    cuda::gemm_w4a8(dw, pdl_gemm_args(x, sx, asum, xsum, c.m, acc), plan, ws.data(), stream);
    QS_CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_waited(acc, snapshot, acc_ref,
                  "activations read before they were written? " + std::string(cuda::w4a8_plan_name(plan.tile, plan.splits)));
  }
}

// The engine's order under programmatic dependent launch: a small kernel
// (quantize_int8) between the kernel that writes its input and the GEMM that
// reads its output. The small kernel lets its dependents launch before its
// own wait (launch_pdl.cuh, pdl_trigger_and_wait), so the GEMM may be
// scheduled while the first kernel, which lets its dependents launch at once
// and then sleeps, has still to write the fp16 rows: three grids in flight.
// The GEMM must read the quantization of the new rows (read after write two
// kernels back) and must not write its output before the first kernel has
// read it (write after read two kernels back).
TEST(GemmW4A8Pdl, WaitsThroughASmallKernel) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  auto& ctx = context();
  const cudaStream_t stream = ctx.stream();
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  RecordProperty("pdl", cuda::pdl_enabled(ctx.info()) ? "on" : "off (plain launches)");
  const int64_t n = 1536, k = 1536;  // six 256-deep units: splits of 2 and 3 even
  const std::vector<float> wf = random_weights(n, k, rng);
  const auto wg = quant::quantize_w4_g128(wf, n, k);
  const auto wp = quant::quantize_w4_per_channel(wf, n, k);
  const cuda::W4A8DeviceWeights dg = cuda::upload_w4a8(wg), dp = cuda::upload_w4a8(wp);
  const bool hopper = cuda::w4a8_wgmma_supported(ctx.info());
  struct PdlCase {
    bool g128;
    int64_t m;
    const char* tile;  // nullptr: the planner's choice
    int splits;
  };
  for (const PdlCase c : {PdlCase{false, 1, nullptr, 0}, PdlCase{true, 7, nullptr, 0}, PdlCase{false, 64, nullptr, 0},
                          PdlCase{true, 64, nullptr, 0}, PdlCase{false, 300, nullptr, 0}, PdlCase{true, 129, nullptr, 0},
                          PdlCase{false, 40, "wg64x64c-k256", 2}, PdlCase{true, 33, "wg128x64c-k256", 3}}) {
    if (c.tile && !hopper) continue;
    const cuda::W4A8DeviceWeights& dw = c.g128 ? dg : dp;
    const cuda::W4A8Plan plan = c.tile ? cuda::plan_w4a8_wgmma(ctx.info(), c.m, n, k, cuda::w4a8_tile(c.tile), c.splits, c.g128)
                                       : cuda::plan_w4a8(ctx.info(), dw, c.m);
    SCOPED_TRACE(std::string(c.g128 ? "g128" : "per-channel") + " m " + std::to_string(c.m) + " " +
                 cuda::w4a8_plan_name(plan.tile, plan.splits));
    // fp16 rows and their CPU quantization: the GPU's is exact against it.
    std::vector<uint16_t> x16(c.m * k);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& v : x16) v = float_to_half(nd(rng));
    std::vector<int8_t> q(c.m * k);
    std::vector<uint16_t> s_x(c.m), a_sum(c.m);
    std::vector<int32_t> x_sum(c.m);
    quantize_int8_cpu(x16.data(), static_cast<int>(c.m), static_cast<int>(k),
                      Int8Rows{q.data(), s_x.data(), a_sum.data(), x_sum.data()});
    std::vector<int32_t> acc_ref(c.m * n);
    std::vector<uint16_t> y_ref(c.m * n);
    if (c.g128)
      cpu::gemm_w4a8_g128(q.data(), s_x.data(), c.m, wg, acc_ref.data(), y_ref.data());
    else
      cpu::gemm_w4a8_per_channel(q.data(), s_x.data(), a_sum.data(), c.m, wp, acc_ref.data(), y_ref.data());
    auto x16_final = to_device(x16);
    cuda::DeviceBuffer x16_dev(c.m * k * 2), x8(c.m * k), sx(c.m * 2), asum(c.m * 2), xsum(c.m * 4);
    cuda::DeviceBuffer acc(c.m * n * 4), snapshot(c.m * n * 4);
    cuda::DeviceBuffer ws(std::max<size_t>(plan.workspace_bytes, 4));
    QS_CUDA_CHECK(cudaMemset(ws.data(), 0, ws.size()));
    QS_CUDA_CHECK(cudaMemset(x16_dev.data(), 0, x16_dev.size()));  // stale rows: all zero
    QS_CUDA_CHECK(cudaMemset(x8.data(), 0x11, x8.size()));
    QS_CUDA_CHECK(cudaMemset(acc.data(), 0x5a, acc.size()));        // what the slow kernel must read
    QS_CUDA_CHECK(cudaMemset(snapshot.data(), 0xff, snapshot.size()));
    QS_CUDA_CHECK(cudaDeviceSynchronize());  // the legacy-stream setup lands before the stream's kernels
    test::launch_late_copies(x16_final.data(), x16_dev.data(), x16_dev.size(), acc.data(), snapshot.data(),
                             snapshot.size(), 200, stream);
    QS_CUDA_CHECK(cuda::quantize_int8(x16_dev.as<uint16_t>(), static_cast<int>(c.m), static_cast<int>(k),
                                      Int8Rows{x8.as<int8_t>(), sx.as<uint16_t>(), asum.as<uint16_t>(),
                                               xsum.as<int32_t>()},
                                      stream));
    cuda::gemm_w4a8(dw, pdl_gemm_args(x8, sx, asum, xsum, c.m, acc), plan, ws.data(), stream);
    QS_CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_waited(acc, snapshot, acc_ref, "rows read before the first kernel wrote them?");
  }
}

using GemmBaselines = GpuTest;

TEST_F(GemmBaselines, W8A8MatchesCpuReference) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto& ctx = context();
  cuda::CublasLtGemm blas(ctx);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 4096, 4096}, {33, 6144, 4096}, {255, 576, 1536},
                         {1024, 1536, 576}}) {
    const auto wf = random_weights(n, k, rng);
    const auto w = quant::quantize_w8_per_channel(wf, n, k);
    const test::QuantizedActivations a = random_activations(m, k, rng);
    std::vector<int32_t> acc_ref(m * n);
    std::vector<uint16_t> y_ref(m * n);
    cpu::gemm_w8a8(a.q.data(), a.s_x.data(), m, w, acc_ref.data(), y_ref.data());
    std::vector<float> sw(n);
    for (int64_t o = 0; o < n; ++o) sw[o] = half_to_float(w.scale[o]);
    auto x = to_device(a.q), sx = to_device(a.s_x), dw = to_device(w.q), dsw = to_device(sw);
    cuda::DeviceBuffer acc(m * n * 4), y(m * n * 2);
    QS_CUDA_CHECK(cudaMemset(acc.data(), 0x7f, acc.size()));
    QS_CUDA_CHECK(cudaMemset(y.data(), 0xff, y.size()));
    QS_CUDA_CHECK(cudaDeviceSynchronize());  // the legacy-stream setup lands before the stream's kernels
    cuda::gemm_w8a8(blas, x.as<int8_t>(), sx.as<__half>(), dw.as<int8_t>(), dsw.as<float>(), acc.as<int32_t>(),
                    y.as<__half>(), m, n, k, ctx.stream());
    QS_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    std::vector<int32_t> acc_gpu(m * n);
    std::vector<uint16_t> y_gpu(m * n);
    acc.download(acc_gpu.data(), acc.size());
    y.download(y_gpu.data(), y.size());
    for (int64_t i = 0; i < m * n; ++i) {
      ASSERT_EQ(acc_gpu[i], acc_ref[i]) << "m " << m << " n " << n << " k " << k << " at " << i;
      ASSERT_LE(ulp_distance(y_gpu[i], y_ref[i]), 1) << "m " << m << " at " << i;
    }
  }
}

TEST_F(GemmBaselines, Fp16MatchesCpuReference) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto& ctx = context();
  cuda::CublasLtGemm blas(ctx);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 4096, 4096}, {77, 576, 1536}}) {
    std::vector<uint16_t> x(m * k), w(n * k), y_gpu(m * n);
    for (auto& v : x) v = float_to_half(d(rng));
    for (auto& v : w) v = float_to_half(0.02f * d(rng));
    auto dx = to_device(x), dw = to_device(w);
    cuda::DeviceBuffer y(m * n * 2);
    QS_CUDA_CHECK(cudaMemset(y.data(), 0xff, y.size()));
    QS_CUDA_CHECK(cudaDeviceSynchronize());  // the legacy-stream setup lands before the stream's kernels
    blas.gemm_f16(dx.as<__half>(), dw.as<__half>(), y.as<__half>(), m, n, k, ctx.stream());
    QS_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    y.download(y_gpu.data(), y.size());
    double err = 0, ref = 0;
    for (int64_t t = 0; t < m; ++t)
      for (int64_t o = 0; o < n; ++o) {
        double r = 0;
        for (int64_t i = 0; i < k; ++i) r += double(half_to_float(x[t * k + i])) * half_to_float(w[o * k + i]);
        const double g = half_to_float(y_gpu[t * n + o]);
        ASSERT_FALSE(std::isnan(g));
        err += (g - r) * (g - r);
        ref += r * r;
      }
    EXPECT_LT(std::sqrt(err / ref), 2e-3) << "m " << m;
  }
}

// The register-A kernels multiply unsigned weight bytes (g128 biased by 128,
// per-channel rows g + 8 at 16 x) into INT32: k above kMaxU8AccK is refused
// at upload, with the error a user sees, not an overflow.
TEST(GemmW4A8Upload, RefusesKBeyondTheAccumulators) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  context();  // the test binary's device and stream
  auto weights = [](int64_t n, int64_t k) {
    quant::W4PerChannelWeights w;
    w.n = n, w.k = k;
    w.qweight.assign(static_cast<size_t>(n * k / 2), 0x77);
    w.scale.assign(static_cast<size_t>(n), 0x3c00);  // 1.0
    w.zero.assign(static_cast<size_t>(n), 8);
    return w;
  };
  constexpr int64_t kMax = cuda::w4a8::kMaxU8AccK;
  EXPECT_NO_THROW(cuda::upload_w4a8(weights(16, kMax)));
  try {
    cuda::upload_w4a8(weights(16, kMax + quant::kMmaTileK));
    ADD_FAILURE() << "k = " << kMax + quant::kMmaTileK << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
  }
}

#else  // no CUDA backend in this build

TEST(GemmW4A8, MatchesCpuReference) { GTEST_SKIP() << "skipped: no CUDA device (CPU-only build)"; }

#endif

}  // namespace
}  // namespace qserve
