// Plan overrides for tuning experiments: the environment variable
// QSERVE_W4A8_PLANS replaces the measured table's (tile, split-K) for the
// layers and m buckets it names, or adds a choice for a layer outside the
// table, without a rebuild. For comparing plans in the engine (the table
// is measured on back-to-back launches of one GEMM; a model interleaves
// other kernels), not for production use: a warning is logged once.
//
//   QSERVE_W4A8_PLANS="NxK@M:KIND=TILE/SPLITS[,...]"
//   e.g. "4096x4096@1:pc=wg128x8c/3,4096x4096@1:g128=wg128x8c/3"
//
// N, K: the layer (output, input features); M: one of the table's m buckets
// (kW4A8MBuckets: it serves m up to itself, 1 up to 8); KIND: pc or
// g128; TILE: a name of w4a8_tile_name (gemm_w4a8.h), a W4 wgmma tile (as the
// table's); SPLITS >= 1, or sk (stream-K, kW4A8StreamK: the
// persistent W4 tiles wg256x8 .. wg256x64, wg256x8a2 .. wg256x32a2,
// wg256x128, wg128x256, wg128x128).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "backend/cuda/gemm_w4a8_measured.h"

namespace qserve::cuda {

struct W4A8PlanOverride {
  int64_t n = 0, k = 0;
  int bucket = 1;
  bool g128 = false;
  W4A8Choice choice;
};

// Parses a QSERVE_W4A8_PLANS value; a malformed entry, an unknown or
// non-wgmma tile or an m that is not a bucket throws qserve::Error
// (kInvalidArgument) naming the entry. Empty: none.
std::vector<W4A8PlanOverride> parse_w4a8_plan_overrides(std::string_view spec);

// The overrides in force: QSERVE_W4A8_PLANS of this process's environment,
// parsed on first use (an invalid value throws qserve::Error from the first
// W4A8 plan), until set_w4a8_plan_overrides replaces them.
const std::vector<W4A8PlanOverride>& w4a8_plan_overrides();
// Replaces the overrides in force with `spec` (QSERVE_W4A8_PLANS syntax; empty:
// none, the measured table), for A/B runs in one process (qserve bench
// throughput --ab-plans). Only while no GEMM is being planned or captured:
// plans already in captured CUDA graphs stay until the graphs are dropped.
// A malformed spec throws and changes nothing.
void set_w4a8_plan_overrides(std::string_view spec);

}  // namespace qserve::cuda
