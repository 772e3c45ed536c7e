#include "backend/cuda/gemm_w4a8_overrides.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "backend/cuda/gemm_w4a8.h"
#include "core/error.h"

namespace qserve::cuda {
namespace {

// A non-negative integer filling `s` exactly, or -1.
int64_t to_int(std::string_view s) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc{} && end == s.data() + s.size() && v >= 0 ? v : -1;
}

W4A8PlanOverride parse_entry(std::string_view e) {
  const std::string entry(e);
  auto fail = [&](const char* why) {
    qserve::fail(ErrorCode::kInvalidArgument,
                 "QSERVE_W4A8_PLANS entry '{}': {} (expected NxK@M:KIND=TILE/SPLITS, SPLITS a number or sk, e.g. 4096x4096@1:pc=wg128x8c/2)",
                 entry, why);
  };
  const size_t x = e.find('x'), at = e.find('@'), colon = e.find(':'), eq = e.find('='), slash = e.rfind('/');
  if (x == e.npos || at == e.npos || colon == e.npos || eq == e.npos || slash == e.npos ||
      !(x < at && at < colon && colon < eq && eq < slash))
    fail("malformed");
  W4A8PlanOverride o;
  o.n = to_int(e.substr(0, x));
  o.k = to_int(e.substr(x + 1, at - x - 1));
  const int64_t m = to_int(e.substr(at + 1, colon - at - 1));
  const std::string_view kind = e.substr(colon + 1, eq - colon - 1);
  const std::string_view tile = e.substr(eq + 1, slash - eq - 1);
  const std::string_view split_text = e.substr(slash + 1);
  const int64_t splits = split_text == "sk" ? kW4A8StreamK : to_int(split_text);
  if (o.n <= 0 || o.k <= 0 || o.k % 64 != 0) fail("N and K must be positive, K a multiple of 64");
  if (m <= 0 || w4a8_m_bucket(m) != m)
    qserve::fail(ErrorCode::kInvalidArgument, "QSERVE_W4A8_PLANS entry '{}': M must be a bucket of the table ({})", entry,
                 fmt::join(kW4A8MBuckets, ", "));
  o.bucket = static_cast<int>(m);
  if (kind != "pc" && kind != "g128") fail("KIND must be pc or g128");
  o.g128 = kind == "g128";
  o.choice.tile = -1;
  for (int t = 0; t < kW4A8TileCount; ++t)
    if (tile == w4a8_tile_name(t)) o.choice.tile = t;
  if (o.choice.tile < 0) fail("unknown tile (the names of w4a8_tile_name, e.g. wg256x8a2c)");
  if (!w4a8_tile_is_wgmma(o.choice.tile) || w4a8_tile_is_s8(o.choice.tile) || w4a8_tile_is_pd(o.choice.tile))
    fail("the table plans W4 wgmma tiles only (not mma.sync, INT8-weight or producer-dequantizing ones)");
  if (splits != kW4A8StreamK && (splits < 1 || splits > 16)) fail("SPLITS must be 1 to 16, or sk (stream-K)");
  if (w4a8_tile_is_cluster(o.choice.tile) && splits > kW4A8MaxClusterSplits) fail("a cluster tile takes at most 8 splits");
  if (w4a8_tile_is_gemv(o.choice.tile) && (splits != 1 || o.bucket > w4a8_tile_tokens(o.choice.tile)))
    fail("the decode tiles take SPLITS 1 and an M bucket within their tokens (gemv8, gemv8d, gemv8r: 1; gemv16, gemv16d, gemv16r: 1 or 16; gemv32r: 1, 16 or 32)");
  if (splits == kW4A8StreamK && !w4a8_tile_has_stream_k(o.choice.tile))
    fail("stream-K takes the persistent W4 tiles only (wg256x8 .. wg256x64, wg256x8a2 .. wg256x32a2, wg256x128, wg128x256, wg128x128)");
  o.choice.splits = static_cast<int>(splits);
  return o;
}

}  // namespace

std::vector<W4A8PlanOverride> parse_w4a8_plan_overrides(std::string_view spec) {
  std::vector<W4A8PlanOverride> out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string_view e = spec.substr(pos, comma == spec.npos ? spec.npos : comma - pos);
    if (!e.empty()) out.push_back(parse_entry(e));
    if (comma == spec.npos) break;
    pos = comma + 1;
  }
  return out;
}

namespace {
std::vector<W4A8PlanOverride>& active_overrides() {
  static std::vector<W4A8PlanOverride> overrides = [] {
    const char* v = std::getenv("QSERVE_W4A8_PLANS");
    std::vector<W4A8PlanOverride> o = parse_w4a8_plan_overrides(v ? v : "");
    if (!o.empty())
      spdlog::warn("QSERVE_W4A8_PLANS: {} W4A8 plan override(s) replace the measured table (tuning experiments only)",
                   o.size());
    return o;
  }();
  return overrides;
}
}  // namespace

const std::vector<W4A8PlanOverride>& w4a8_plan_overrides() { return active_overrides(); }

void set_w4a8_plan_overrides(std::string_view spec) {
  std::vector<W4A8PlanOverride> o = parse_w4a8_plan_overrides(spec);  // throws before anything changes
  if (!o.empty())
    spdlog::warn("W4A8 plan overrides: {} replace the measured table (tuning experiments only)", o.size());
  active_overrides() = std::move(o);
}

}  // namespace qserve::cuda
