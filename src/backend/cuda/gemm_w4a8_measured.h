// Internal to the W4A8 GEMM: measured plans for the benchmark's layer shapes
// at m <= 512 on sm_90 (the H200 sweep of every tile x split-K, both kinds,
// both kernel families). The planner consults this table first and falls
// back to its rules for other shapes.
#pragma once

#include <cstdint>
#include <optional>

namespace qserve::cuda {

struct W4A8Choice {
  int tile = 0;    // global tile id (gemm_w4a8.h)
  int splits = 1;  // split-K
};

// The fastest measured (tile, split-K) for a problem of m <= 512 tokens on a
// layer of the table (n, k exact), in the m bucket that holds m (1..8 -> 1,
// 9..16 -> 16, then 32, 64, 128, 256, 512). wgmma_only: the fastest wgmma
// tile. nullopt: no entry (other shape, or m > 512). The environment's plan
// overrides (QSERVE_W4A8_PLANS, gemm_w4a8_overrides.h) come first.
std::optional<W4A8Choice> measured_w4a8_plan(int64_t m, int64_t n, int64_t k, bool g128, bool wgmma_only);

}  // namespace qserve::cuda
