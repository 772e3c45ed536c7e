// The W4A8 GEMM's tile names, in tile-id order, and their lookup at compile
// time, so that code which picks a tile (the measured plan table) names it
// instead of citing a number: inserting a tile moves the ids after it, and
// every named use follows. The names are those of w4a8_tile_name, of
// QSERVE_W4A8_PLANS and of bench_gemm's sweeps; a plan is "NAME/SPLITS"
// (SPLITS a split-K count or "sk" for stream-K, gemm_w4a8.h).
//
// Host code, meant for constant expressions (a table, a static_assert), where
// a bad name fails the build (the throw is not a constant expression). The id
// ranges of gemm_w4a8.h are checked against these names in gemm_w4a8.cpp.
#pragma once

#include <string_view>

#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_measured.h"

namespace qserve::cuda {

// channels x tokens; "wg" = the sm_90a wgmma family, "c" split-K within a
// cluster, "-kD" D-deep k stages, "a2" two accumulator sets, "o2" two CTAs
// per SM, "mc" the multicast pair; s8_ / pd_ the INT8-weight consumers;
// gemv* the decode kernels.
inline constexpr std::string_view kW4A8TileNames[kW4A8TileCount] = {
    "128x8",            "128x16",          "128x32",          "128x64",         "128x128",          // 0-4
    "256x128",          "wg256x8",         "wg256x16",        "wg256x32",       "wg256x64",         // 5-9
    "wg256x128",        "wg128x256",       "wg128x128",       "wg256x8a2",      "wg256x16a2",       // 10-14
    "wg256x32a2",       "s8_256x128",      "s8_128x256",      "s8_128x128",     "s8_256x64",        // 15-19
    "pd_256x128",       "pd_128x256",      "pd_128x128",      "wg256x8a2c",     "wg256x16a2c",      // 20-24
    "wg256x32c",        "wg256x64c",       "wg256x128c",      "wg128x64c",      "wg128x8c",         // 25-29
    "wg128x16c",        "wg128x8c-k256",   "wg128x8c-k512",   "wg128x16c-k256", "wg128x16c-k512",   // 30-34
    "wg256x8a2c-k256",  "wg256x16a2c-k256", "wg256x32c-k256", "wg128x64c-k256", "wg256x64c-k256",   // 35-39
    "wg128x32c-k256",   "wg128x32c-k512",  "wg128x32c-k256o2", "wg128x128c-k256", "wg64x64c",       // 40-44
    "wg64x32c-k256",    "wg64x64c-k256",   "wg128x160",       "wg128x192",      "wg128x208",        // 45-49
    "wg128x224",        "wg128x256mc",     "gemv8",           "gemv16",         "gemv8d",           // 50-54
    "gemv16d",          "gemv8r",          "gemv16r",         "gemv32r"};                           // 55-58

// The id of the tile named `name`; a name not in the list does not compile
// (in a constant expression).
constexpr int w4a8_tile(std::string_view name) {
  for (int i = 0; i < kW4A8TileCount; ++i)
    if (kW4A8TileNames[i] == name) return i;
  throw "w4a8_tile: no tile of this name (gemm_w4a8_tile_names.h)";
}

// A plan written "NAME/SPLITS" ("wg128x32c-k256/3", "wg128x256/sk"); a bad
// name or split does not compile (in a constant expression).
constexpr W4A8Choice w4a8_plan(std::string_view plan) {
  const size_t slash = plan.rfind('/');
  if (slash == std::string_view::npos || slash + 1 == plan.size()) throw "w4a8_plan: NAME/SPLITS expected";
  const std::string_view splits = plan.substr(slash + 1);
  W4A8Choice c{w4a8_tile(plan.substr(0, slash)), 0};
  if (splits == "sk") {
    c.splits = kW4A8StreamK;
    return c;
  }
  for (const char ch : splits) {
    if (ch < '0' || ch > '9') throw "w4a8_plan: the splits are a number or sk";
    c.splits = 10 * c.splits + (ch - '0');
  }
  if (c.splits < 1) throw "w4a8_plan: splits >= 1";
  return c;
}

}  // namespace qserve::cuda
