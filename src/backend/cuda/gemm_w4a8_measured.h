// Internal to the W4A8 GEMM: measured plans for the benchmark's layer shapes
// (m <= 512, and a few rows above) on sm_90 (the H200 sweeps of the wgmma tiles x split-K, both
// kinds; the mma.sync tiles won no row since round 6). Both planners consult
// this table first and fall back to their rules for other shapes (and for
// the layers at m > 512 that have no entry: the rule's tile measured within
// 0.1-0.8% of the best 128-channel tile there, bench/results/2026-11-30-gemm-
// h200-r11.md), and above m = 128 for an m that the entry's token tile pads
// badly (measured_w4a8_plan).
#pragma once

#include <cstdint>
#include <optional>

namespace qserve::cuda {

struct W4A8Choice {
  int tile = 0;    // global tile id (gemm_w4a8.h)
  int splits = 1;  // split-K, or kW4A8StreamK (gemm_w4a8.h)
};

// The table's m buckets, each named by the largest m it serves (bucket 1:
// m = 1..8, measured at m = 1); m above the last has no bucket.
inline constexpr int kW4A8MBuckets[] = {1, 16, 32, 64, 128, 256, 512, 1024, 4096, 8192};

// The bucket of kW4A8MBuckets that holds m (1..8 -> 1, 9..16 -> 16, ...); 0
// for m <= 0 or above the last.
int w4a8_m_bucket(int64_t m);

// The fastest measured (tile, split-K), a wgmma tile, for a problem of m <=
// 8192 tokens on a layer of the table (n, k exact), in m's bucket. nullopt: no
// entry (other shape, most layers at m > 512, or m > 8192), or, above m =
// 128, an entry whose token tile (not a cluster tile) pads m's token blocks
// by over 20% more than the bucket's top m (where it was measured). The plan overrides in
// force (QSERVE_W4A8_PLANS or set_w4a8_plan_overrides, gemm_w4a8_overrides.h) come first
// and apply as given.
// overridden (optional): set to whether the choice came from QSERVE_W4A8_PLANS.
std::optional<W4A8Choice> measured_w4a8_plan(int64_t m, int64_t n, int64_t k, bool g128,
                                             bool* overridden = nullptr);

}  // namespace qserve::cuda
