#include "backend/cuda/gemm_w4a8.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_w4a8_gemv.h"
#include "backend/cuda/gemm_w4a8_launch.h"
#include "backend/cuda/gemm_w4a8_tile_names.h"
#include "backend/cuda/gemm_w4a8_wgmma.h"
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "backend/cuda/repack_upload.h"
#include "core/error.h"
#include "core/half.h"
#include "quant/gemm_epilogue.h"
#include "quant/w4a8_repack.h"

namespace qserve::cuda {
namespace {

using w4a8::KernelParams;
using w4a8::kTiles;

std::vector<float> to_float(const std::vector<uint16_t>& h, int64_t padded) {
  std::vector<float> f(padded, 0.0f);
  for (size_t i = 0; i < h.size(); ++i) f[i] = half_to_float(h[i]);
  return f;
}

W4A8DeviceWeights upload_common(W4A8Kind kind, int64_t n, int64_t k, const std::vector<uint8_t>& qweight) {
  if (k % quant::kMmaTileK != 0)
    fail(ErrorCode::kUnsupported, "W4A8 CUDA GEMM: k = {} is not a multiple of {}", k, quant::kMmaTileK);
  if (k > w4a8::kMaxU8AccK)  // the u8 x s8 MMAs' INT32 accumulators (gemm_w4a8_launch.h)
    fail(ErrorCode::kUnsupported, "W4A8 CUDA GEMM: k = {} is above the {} that INT32 accumulators hold", k,
         w4a8::kMaxU8AccK);
  W4A8DeviceWeights d;
  d.kind = kind;
  d.n = n;
  d.k = k;
  d.n16 = quant::padded_rows(n) / quant::kMmaTileRows;
  d.qweight = upload_repacked_w4(qweight.data(), n, k);
  return d;
}

}  // namespace

// The id ranges of gemm_w4a8.h, tied to the names (an insertion that does
// not move a range's bounds fails here).
static_assert(w4a8_tile("wg256x8") == kW4A8FirstWgmmaTile && kW4A8FirstWgmmaTile == w4a8::kTileCount);
static_assert(w4a8_tile("s8_256x128") == kW4A8FirstS8Tile && w4a8_tile("pd_256x128") == kW4A8FirstPdTile);
static_assert(w4a8_tile("wg256x8a2c") == kW4A8FirstClusterTile && w4a8_tile("wg128x8c-k256") == kW4A8FirstDeepTile);
static_assert(w4a8_tile("wg64x64c") == kW4A8FirstBn64Tile && w4a8_tile("wg64x64c-k256") + 1 == kW4A8EndClusterTile);
static_assert(w4a8_tile("wg128x160") == kW4A8FirstMidTile && w4a8_tile("wg128x224") + 1 == kW4A8EndMidTile);
static_assert(w4a8_tile("wg128x256mc") == kW4A8FirstMcTile && w4a8_tile("gemv8") == kW4A8FirstGemvTile);
static_assert(w4a8_tile("wg256x8") == kW4A8FirstStreamKTile && w4a8_tile("wg256x32a2") + 1 == kW4A8EndStreamKTile);
static_assert(w4a8_tile("gemv32r") + 1 == kW4A8TileCount);

const char* w4a8_tile_name(int tile) {
  // string_views of literals: null-terminated
  return tile >= 0 && tile < kW4A8TileCount ? kW4A8TileNames[tile].data() : "?";
}

int w4a8_tile_tokens(int tile) {
  if (tile < 0 || tile >= kW4A8TileCount) return 0;
  if (w4a8_tile_is_gemv(tile)) return w4a8::gemv::kernel_tokens(w4a8_gemv_kernel(tile));
  return w4a8_tile_is_wgmma(tile) ? w4a8::wgmma::kTiles[tile - kW4A8FirstWgmmaTile].bm : kTiles[tile].bm;
}

std::string w4a8_plan_name(int tile, int splits) {
  return std::string(w4a8_tile_name(tile)) + "/" + (splits == kW4A8StreamK ? std::string("sk") : std::to_string(splits));
}

bool w4a8_gemv_fits(const DeviceInfo& dev, int tile, int64_t k, bool g128) {
  if (!w4a8_tile_is_gemv(tile)) return false;
  // the dynamic part beside the kernel's static one, within the device's
  // opt-in and the launch's (kMaxResidentSmem)
  using w4a8::gemv::kResidentStaticSmem;
  const size_t optin = dev.smem_per_block_optin > 0 ? dev.smem_per_block_optin : w4a8::gemv::kSm90SmemOptin;
  const size_t limit =
      std::min(optin > kResidentStaticSmem ? optin - kResidentStaticSmem : 0, w4a8::gemv::kMaxResidentSmem);
  return k <= (int64_t{1} << 30) &&
         w4a8::gemv::resident_smem_bytes(w4a8_gemv_kernel(tile), g128, static_cast<int>(k)) <= limit;
}

bool w4a8_wgmma_supported(const DeviceInfo& dev) { return dev.cc_major == 9 && dev.cc_minor == 0; }
bool w4a8_tile_supported(const DeviceInfo& dev, int tile) {
  return tile >= 0 && tile < kW4A8TileCount && (!w4a8_tile_is_wgmma(tile) || w4a8_wgmma_supported(dev));
}

W4A8DeviceWeights upload_w4a8(const quant::W4G128Weights& w) {
  QS_CHECK(w.group == quant::kGroupSize) << "the CUDA kernels take g = 128, got " << w.group;
  W4A8DeviceWeights d = upload_common(W4A8Kind::kG128, w.n, w.k, w.qweight);
  d.groups = w.groups();
  const std::vector<uint32_t> l2 = quant::repack_level2_mma(w.s2.data(), w.zero.data(), w.n, d.groups);
  d.level2 = DeviceBuffer(l2.size() * 4);
  d.level2.upload(l2);
  const std::vector<float> s1 = to_float(w.s1, d.n16 * 16);
  d.ch_scale = DeviceBuffer(s1.size() * 4);
  d.ch_scale.upload(s1);
  return d;
}

W4A8DeviceWeights upload_w4a8(const quant::W4PerChannelWeights& w) {
  W4A8DeviceWeights d = upload_common(W4A8Kind::kPerChannel, w.n, w.k, w.qweight);
  const std::vector<float> s = to_float(w.scale, d.n16 * 16);
  std::vector<float> sz(s.size(), 0.0f);
  for (int64_t o = 0; o < w.n; ++o) sz[o] = quant::scaled_zero_point(s[o], w.zero[o]);
  d.ch_scale = DeviceBuffer(s.size() * 4);
  d.ch_scale.upload(s);
  d.ch_szero = DeviceBuffer(sz.size() * 4);
  d.ch_szero.upload(sz);
  return d;
}

namespace {
// 2^round(log2(x)), at least 1.
int nearest_pow2(double x) {
  if (x <= 1.0) return 1;
  return 1 << static_cast<int>(std::lround(std::log2(x)));
}

// For m > 64: resident CTAs per SM of each candidate tile (registers and
// shared memory from the compiler's resource report), largest tile first.
struct TileModel {
  int tile;
  int ctas_per_sm;
};
constexpr TileModel kLargeMTiles[] = {{5, 1}, {3, 3}, {2, 3}};

// The fraction of the last wave's slots that the grid fills, over all waves.
double wave_efficiency(int64_t ctas, int64_t slots) {
  const int64_t waves = (ctas + slots - 1) / slots;
  return static_cast<double>(ctas) / static_cast<double>(waves * slots);
}
}  // namespace

// Tile and split-K rules fitted to sweeps of every (tile, split) on the H200
// (bench/results/2026-11-29-gemm-w4a8-h200.md):
//  - m <= 64: the smallest tile that holds m (128 x 64 for 33..64 when it fills
//    the GPU, else 128 x 32), split-K up to ~4 CTAs per SM at m <= 8 (g128,
//    with more arithmetic per byte, twice that), ~3 at m <= 16, ~2 above;
//  - m > 64: the largest tile whose grid fills its waves to >= 80% (the last
//    one included), else 128 x 32; split-K only when even that
//    leaves SMs idle (splits cost more than they give once m > 64).
W4A8Plan plan_w4a8_mma(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile, int force_splits,
                       bool g128) {
  QS_CHECK(m > 0 && n > 0 && k > 0 && k % quant::kMmaTileK == 0);
  QS_CHECK(force_tile < kW4A8FirstWgmmaTile) << "not an mma.sync tile: " << force_tile;
  if (force_splits == kW4A8StreamK) fail(ErrorCode::kInvalidArgument, "stream-K takes the wgmma tiles only");
  W4A8Plan plan;
  const int sms = std::max(1, dev.sm_count);
  const int kt_total = static_cast<int>(k / quant::kMmaTileK);
  auto ctas = [&](int tile) {
    const w4a8::TileShape s = kTiles[tile];
    return ((n + s.bn - 1) / s.bn) * ((m + s.bm - 1) / s.bm);
  };
  int splits = 0;
  if (force_tile >= 0) {
    plan.tile = force_tile;
  } else if (m <= 8) {
    plan.tile = 0;
  } else if (m <= 16) {
    plan.tile = 1;
  } else if (m <= 32) {
    plan.tile = 2;
  } else if (m <= 64) {
    plan.tile = ctas(3) >= sms ? 3 : 2;
  } else {
    plan.tile = 2;
    for (const TileModel& t : kLargeMTiles) {
      const int64_t slots = int64_t{sms} * t.ctas_per_sm;
      if (wave_efficiency(ctas(t.tile), slots) >= 0.8) {  // also means >= 80% of one wave
        plan.tile = t.tile;
        break;
      }
    }
    if (plan.tile == 2 && ctas(2) < sms)
      splits = std::min(nearest_pow2(static_cast<double>(sms) / ctas(2)), std::max(1, kt_total / 8));
  }
  const w4a8::TileShape s = kTiles[plan.tile];
  plan.grid_n = static_cast<int>((n + s.bn - 1) / s.bn);
  plan.grid_m = static_cast<int>((m + s.bm - 1) / s.bm);
  const int64_t base = int64_t{plan.grid_n} * plan.grid_m;
  if (force_splits > 0) {
    splits = force_splits;
  } else if (force_tile >= 0 && m > 64) {
    splits = 1;
  } else if (m <= 64 && force_tile < 0) {
    const double per_sm = m <= 8 ? (g128 ? 8.0 : 4.0) : m <= 16 ? 3.0 : 2.0;
    splits = nearest_pow2(per_sm * sms / static_cast<double>(base));
    splits = std::min({splits, 16, std::max(1, kt_total / 4)});  // at least 4 k tiles per split
  }
  splits = std::clamp(splits, 1, kt_total);
  plan.kt_per_split = (kt_total + splits - 1) / splits;
  plan.splits = (kt_total + plan.kt_per_split - 1) / plan.kt_per_split;  // no empty split
  plan.workspace_bytes = plan.workspace_bytes_for(m, n);
  // Not for the mma.sync tiles: several of their CTAs share an SM and the
  // early dependents slowed them down (g128 m <= 64 up to 1.3x slower with
  // PDL in bench/results/2026-11-29-gemm-h200-r3.md).
  plan.pdl = false;
  return plan;
}

// On sm_90: the wgmma family's planner, which takes the measured plan for
// the benchmark's layer shapes at m <= 512 and a few rows above
// (gemm_w4a8_measured.cpp) and its rules elsewhere: with the cluster tiles
// and the level-2 words copied with each stage, the mma.sync tiles no longer
// win anywhere in the H200 sweep (bench/results/2026-11-30-gemm-h200-r6.md).
// mma.sync elsewhere.
W4A8Plan plan_w4a8(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile, int force_splits,
                   bool g128) {
  if (force_tile >= 0)
    return w4a8_tile_is_wgmma(force_tile) ? plan_w4a8_wgmma(dev, m, n, k, force_tile, force_splits, g128)
                                          : plan_w4a8_mma(dev, m, n, k, force_tile, force_splits, g128);
  if (w4a8_wgmma_supported(dev)) return plan_w4a8_wgmma(dev, m, n, k, -1, force_splits, g128);
  return plan_w4a8_mma(dev, m, n, k, -1, force_splits, g128);
}

void gemm_w4a8(const W4A8DeviceWeights& w, const W4A8Args& args, const W4A8Plan& plan, void* workspace,
               cudaStream_t stream) {
  const bool gemv = w4a8_tile_is_gemv(plan.tile);  // the decode kernel: the mma.sync kernels' parameters
  if (w4a8_tile_is_wgmma(plan.tile) && !gemv) {
    gemm_w4a8_wgmma(w, args, plan, workspace, stream);
    return;
  }
  QS_CHECK(args.m > 0 && args.x && (args.y || args.acc_out));
  QS_CHECK(args.acc_out || args.s_x) << "the fp16 epilogue needs s_x";
  QS_CHECK(w.kind == W4A8Kind::kG128 || args.acc_out || args.a_sum) << "per-channel W4A8 needs a_sum";
  QS_CHECK(w.kind != W4A8Kind::kG128 || args.x_sum) << "g128 W4A8 needs x_sum";
  QS_CHECK(workspace || plan.workspace_bytes == 0);
  QS_CHECK(args.m * w.n < (int64_t{1} << 31) && args.m * w.k < (int64_t{1} << 31))
      << "m * n or m * k too large for 32-bit indexing";
  KernelParams p{};
  p.x = args.x;
  p.w = w.qweight.as<const uint4>();
  p.level2 = w.level2.as<const uint32_t>();
  p.s_x = args.s_x;
  p.a_sum = args.a_sum;
  p.x_sum = args.x_sum;
  p.ch_scale = w.ch_scale.as<const float>();
  p.ch_szero = w.ch_szero.as<const float>();
  p.y = args.y;
  p.acc_out = args.acc_out;
  p.counters = static_cast<int*>(workspace);
  p.partials = reinterpret_cast<int32_t*>(static_cast<char*>(workspace) + plan.counter_bytes());
  p.m = static_cast<int>(args.m);
  p.n = static_cast<int>(w.n);
  p.k = static_cast<int>(w.k);
  p.n16 = static_cast<int>(w.n16);
  p.groups = static_cast<int>(w.groups);
  if (gemv) {
    QS_CHECK(plan.grid_n == (w.n + 15) / 16 && args.m <= w4a8_tile_tokens(plan.tile)) << "plan made for another shape";
    QS_CHECK(reinterpret_cast<uintptr_t>(args.x) % 16 == 0) << "the decode kernel copies the activations in 16-byte pieces";
    QS_CHECK(w.k <= w4a8::kMaxU8AccK)
        << "k = " << w.k << ": the decode kernels' u8 x s8 INT32 accumulators hold k <= " << w4a8::kMaxU8AccK;
    w4a8::gemv::launch_gemv(w.kind == W4A8Kind::kG128, w4a8_gemv_kernel(plan.tile), p, plan.ctas, stream, plan.pdl);
    return;
  }
  p.splits = plan.splits;
  p.kt_per_split = plan.kt_per_split;
  const dim3 grid(plan.grid_n, plan.grid_m, plan.splits);
  QS_CHECK(plan.grid_m <= 65535);
  const w4a8::TileShape& s = kTiles[plan.tile];
  QS_CHECK(plan.grid_n == (w.n + s.bn - 1) / s.bn && plan.grid_m == (args.m + s.bm - 1) / s.bm)
      << "plan made for another shape";
  w4a8::launch_kernel(plan.tile, w.kind == W4A8Kind::kG128, p, grid, stream, plan.pdl);
}

}  // namespace qserve::cuda
