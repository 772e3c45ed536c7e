#include "backend/cuda/gemm_w4a8_measured.h"

namespace qserve::cuda {
namespace {

struct Entry {
  int64_t n, k;
  int m;  // bucket: the largest m it serves (1: m <= 8, measured at m = 1)
  W4A8Choice pc, pc_wgmma, g128, g128_wgmma;
};

// Tile ids: 0 128x8, 1 128x16, 2 128x32 (mma.sync); 6 wg256x8, 7 wg256x16,
// 8 wg256x32, 9 wg256x64, 10 wg256x128, 11 wg128x256, 12 wg128x128, 13-15
// wg256x8a2 / x16a2 / x32a2 (two accumulator sets) (wgmma); 18 s8_128x128.
// From `bench_gemm --sweep --m 1,16,32,64,128,256 --graph-us 500` and
// `bench_gemm --sweep --m 512 --graph-us 500` (wgmma tiles only) on the H200
// (bench/results/2026-11-29-gemm-wgmma-h200-r2.md): per row the fastest of
// every tile x split-K (wgmma tiles 1, 2, 3, 4, 6, 8, 12, 16 splits; mma.sync
// tiles 1, 2, 4, 8, 16), weights cold (rotated over copies > 2x L2). Two
// patterns stand out: a token tile smaller than m (the weights are re-read
// from L2, cheaply, by each token block) beats the tile that holds m, since
// more units fill the SMs without split-K's fix-up; g128 keeps the mma.sync
// kernels up to m = 32 (64 on the narrow layers), per-channel almost never;
// at m = 512 the unsplit 128 x 128 tile beats the cost model's 128 x 256 with
// split-K 2 on the down layers (1.2-1.7x), and g128 prefers 128 x 256 where
// per-channel takes 256 x 128. Round 3 (bench/results/2026-11-29-gemm-h200-r3.md:
// the wgmma kernels launched with programmatic dependent launch, the
// mma.sync ones without) moved the 70B down per-channel m = 16 and 32 rows
// to wgmma tiles; round 4's sweep (2026-11-29-gemm-h200-r4.md) gave the two
// m = 64 rows where a two-accumulator tile won. The g128 m = 512 rows of the
// 4096-row layers (o, down) take the dequantization pass + s8_128x128 (tile
// 18), measured faster there in 2026-11-30-gemm-s8-h200-final.md (the wide
// layers and the 70B down keep the W4 tiles: the pass costs them more).
constexpr Entry kTable[] = {
    {4096, 4096, 1, {6, 4}, {6, 4}, {0, 8}, {7, 8}},  // pc wg256x8/4, wg wg256x8/4; g128 128x8/8, wg wg256x16/8
    {4096, 4096, 16, {6, 4}, {6, 4}, {0, 4}, {7, 4}},  // pc wg256x8/4, wg wg256x8/4; g128 128x8/4, wg wg256x16/4
    {4096, 4096, 32, {6, 2}, {6, 2}, {1, 4}, {7, 4}},  // pc wg256x8/2, wg wg256x8/2; g128 128x16/4, wg wg256x16/4
    {4096, 4096, 64, {14, 1}, {14, 1}, {2, 4}, {7, 2}},  // pc wg256x16a2/1 (r4 sweep: 10.7 us vs wg256x16/2 11.7), wg the same; g128 128x32/4, wg wg256x16/2
    {4096, 4096, 128, {7, 1}, {7, 1}, {8, 2}, {8, 2}},  // pc wg256x16/1, wg wg256x16/1; g128 wg256x32/2, wg wg256x32/2
    {4096, 4096, 256, {8, 1}, {8, 1}, {12, 2}, {12, 2}},  // pc wg256x32/1, wg wg256x32/1; g128 wg128x128/2, wg wg128x128/2
    {4096, 4096, 512, {12, 1}, {12, 1}, {18, 1}, {18, 1}},  // pc wg128x128/1; g128 s8_128x128/1 (+ pass: 20.7 us vs wg128x128/1 22.8)
    {6144, 4096, 1, {6, 3}, {6, 3}, {0, 8}, {7, 4}},  // pc wg256x8/3, wg wg256x8/3; g128 128x8/8, wg wg256x16/4
    {6144, 4096, 16, {6, 2}, {6, 2}, {1, 4}, {7, 4}},  // pc wg256x8/2, wg wg256x8/2; g128 128x16/4, wg wg256x16/4
    {6144, 4096, 32, {7, 2}, {7, 2}, {1, 4}, {7, 2}},  // pc wg256x16/2, wg wg256x16/2; g128 128x16/4, wg wg256x16/2
    {6144, 4096, 64, {7, 1}, {7, 1}, {15, 2}, {15, 2}},  // pc wg256x16/1, wg wg256x16/1; g128 wg256x32a2/2 (r4 sweep: 19.1 us vs 128x32/4 19.8), wg the same
    {6144, 4096, 128, {8, 1}, {8, 1}, {12, 2}, {12, 2}},  // pc wg256x32/1, wg wg256x32/1; g128 wg128x128/2, wg wg128x128/2
    {6144, 4096, 256, {12, 1}, {12, 1}, {12, 1}, {12, 1}},  // pc wg128x128/1, wg wg128x128/1; g128 wg128x128/1, wg wg128x128/1
    {6144, 4096, 512, {10, 1}, {10, 1}, {11, 1}, {11, 1}},  // pc wg256x128/1; g128 wg128x256/1
    {12288, 4096, 1, {6, 2}, {6, 2}, {0, 4}, {7, 2}},  // pc wg256x8/2, wg wg256x8/2; g128 128x8/4, wg wg256x16/2
    {12288, 4096, 16, {7, 2}, {7, 2}, {1, 4}, {7, 2}},  // pc wg256x16/2, wg wg256x16/2; g128 128x16/4, wg wg256x16/2
    {12288, 4096, 32, {7, 1}, {7, 1}, {2, 4}, {8, 2}},  // pc wg256x16/1, wg wg256x16/1; g128 128x32/4, wg wg256x32/2
    {12288, 4096, 64, {8, 1}, {8, 1}, {12, 1}, {12, 1}},  // pc wg256x32/1, wg wg256x32/1; g128 wg128x128/1, wg wg128x128/1
    {12288, 4096, 128, {12, 1}, {12, 1}, {12, 1}, {12, 1}},  // pc wg128x128/1, wg wg128x128/1; g128 wg128x128/1, wg wg128x128/1
    {12288, 4096, 256, {10, 1}, {10, 1}, {11, 1}, {11, 1}},  // pc wg256x128/1, wg wg256x128/1; g128 wg128x256/1, wg wg128x256/1
    {12288, 4096, 512, {12, 1}, {12, 1}, {11, 1}, {11, 1}},  // pc wg128x128/1; g128 wg128x256/1
    {22016, 4096, 1, {6, 1}, {6, 1}, {0, 2}, {7, 3}},  // pc wg256x8/1, wg wg256x8/1; g128 128x8/2, wg wg256x16/3
    {22016, 4096, 16, {7, 1}, {7, 1}, {1, 2}, {7, 1}},  // pc wg256x16/1, wg wg256x16/1; g128 128x16/2, wg wg256x16/1
    {22016, 4096, 32, {8, 1}, {8, 1}, {2, 2}, {8, 1}},  // pc wg256x32/1, wg wg256x32/1; g128 128x32/2, wg wg256x32/1
    {22016, 4096, 64, {9, 1}, {9, 1}, {9, 1}, {9, 1}},  // pc wg256x64/1, wg wg256x64/1; g128 wg256x64/1, wg wg256x64/1
    {22016, 4096, 128, {10, 1}, {10, 1}, {10, 1}, {10, 1}},  // pc wg256x128/1, wg wg256x128/1; g128 wg256x128/1, wg wg256x128/1
    {22016, 4096, 256, {12, 1}, {12, 1}, {11, 1}, {11, 1}},  // pc wg128x128/1, wg wg128x128/1; g128 wg128x256/1, wg wg128x256/1
    {22016, 4096, 512, {10, 1}, {10, 1}, {11, 1}, {11, 1}},  // pc wg256x128/1; g128 wg128x256/1
    {28672, 4096, 1, {6, 1}, {6, 1}, {0, 8}, {7, 1}},  // pc wg256x8/1, wg wg256x8/1; g128 128x8/8, wg wg256x16/1
    {28672, 4096, 16, {7, 1}, {7, 1}, {1, 1}, {7, 1}},  // pc wg256x16/1, wg wg256x16/1; g128 128x16/1, wg wg256x16/1
    {28672, 4096, 32, {8, 1}, {8, 1}, {2, 1}, {8, 1}},  // pc wg256x32/1, wg wg256x32/1; g128 128x32/1, wg wg256x32/1
    {28672, 4096, 64, {9, 1}, {9, 1}, {9, 1}, {9, 1}},  // pc wg256x64/1, wg wg256x64/1; g128 wg256x64/1, wg wg256x64/1
    {28672, 4096, 128, {10, 1}, {10, 1}, {10, 1}, {10, 1}},  // pc wg256x128/1, wg wg256x128/1; g128 wg256x128/1, wg wg256x128/1
    {28672, 4096, 256, {10, 1}, {10, 1}, {11, 1}, {11, 1}},  // pc wg256x128/1, wg wg256x128/1; g128 wg128x256/1, wg wg128x256/1
    {28672, 4096, 512, {10, 1}, {10, 1}, {11, 1}, {11, 1}},  // pc wg256x128/1; g128 wg128x256/1
    {4096, 11008, 1, {0, 8}, {6, 6}, {0, 8}, {7, 8}},  // pc 128x8/8, wg wg256x8/6; g128 128x8/8, wg wg256x16/8
    {4096, 11008, 16, {6, 4}, {6, 4}, {1, 8}, {7, 8}},  // pc wg256x8/4, wg wg256x8/4; g128 128x16/8, wg wg256x16/8
    {4096, 11008, 32, {7, 4}, {7, 4}, {2, 4}, {7, 4}},  // pc wg256x16/4, wg wg256x16/4; g128 128x32/4, wg wg256x16/4
    {4096, 11008, 64, {8, 4}, {8, 4}, {2, 4}, {8, 4}},  // pc wg256x32/4, wg wg256x32/4; g128 128x32/4, wg wg256x32/4
    {4096, 11008, 128, {8, 2}, {8, 2}, {12, 4}, {12, 4}},  // pc wg256x32/2, wg wg256x32/2; g128 wg128x128/4, wg wg128x128/4
    {4096, 11008, 256, {12, 2}, {12, 2}, {12, 2}, {12, 2}},  // pc wg128x128/2, wg wg128x128/2; g128 wg128x128/2, wg wg128x128/2
    {4096, 11008, 512, {12, 1}, {12, 1}, {18, 1}, {18, 1}},  // pc wg128x128/1; g128 s8_128x128/1 (+ pass: 49.3 us vs wg128x128/1 55.8)
    {4096, 14336, 1, {0, 8}, {6, 6}, {0, 8}, {7, 8}},  // pc 128x8/8, wg wg256x8/6; g128 128x8/8, wg wg256x16/8
    {4096, 14336, 16, {6, 4}, {6, 4}, {1, 8}, {7, 8}},  // pc wg256x8/4, wg wg256x8/4; g128 128x16/8, wg wg256x16/8
    {4096, 14336, 32, {7, 4}, {7, 4}, {2, 8}, {7, 4}},  // pc wg256x16/4, wg wg256x16/4; g128 128x32/8, wg wg256x16/4
    {4096, 14336, 64, {8, 4}, {8, 4}, {2, 4}, {8, 4}},  // pc wg256x32/4, wg wg256x32/4; g128 128x32/4, wg wg256x32/4
    {4096, 14336, 128, {8, 2}, {8, 2}, {12, 4}, {12, 4}},  // pc wg256x32/2, wg wg256x32/2; g128 wg128x128/4, wg wg128x128/4
    {4096, 14336, 256, {12, 2}, {12, 2}, {12, 2}, {12, 2}},  // pc wg128x128/2, wg wg128x128/2; g128 wg128x128/2, wg wg128x128/2
    {4096, 14336, 512, {12, 1}, {12, 1}, {18, 1}, {18, 1}},  // pc wg128x128/1; g128 s8_128x128/1 (+ pass: 63.9 us vs wg128x128/1 77.2)
    {8192, 28672, 1, {0, 4}, {6, 3}, {0, 8}, {7, 4}},  // pc 128x8/4, wg wg256x8/3; g128 128x8/8, wg wg256x16/4
    {8192, 28672, 16, {7, 4}, {7, 4}, {1, 8}, {7, 4}},  // pc wg256x16/4 (r3: with PDL 33.6 us vs 128x16/4 38.6), wg wg256x16/4; g128 128x16/8, wg wg256x16/4
    {8192, 28672, 32, {8, 3}, {8, 3}, {2, 4}, {8, 4}},  // pc wg256x32/3 (r3: with PDL 40.5 us vs 128x32/4 42.6), wg wg256x32/3; g128 128x32/4, wg wg256x32/4
    {8192, 28672, 64, {8, 2}, {8, 2}, {9, 4}, {9, 4}},  // pc wg256x32/2, wg wg256x32/2; g128 wg256x64/4, wg wg256x64/4
    {8192, 28672, 128, {12, 2}, {12, 2}, {12, 2}, {12, 2}},  // pc wg128x128/2, wg wg128x128/2; g128 wg128x128/2, wg wg128x128/2
    {8192, 28672, 256, {12, 1}, {12, 1}, {11, 2}, {11, 2}},  // pc wg128x128/1, wg wg128x128/1; g128 wg128x256/2, wg wg128x256/2
    {8192, 28672, 512, {11, 1}, {11, 1}, {11, 1}, {11, 1}},  // pc wg128x256/1; g128 wg128x256/1
};

}  // namespace

std::optional<W4A8Choice> measured_w4a8_plan(int64_t m, int64_t n, int64_t k, bool g128, bool wgmma_only) {
  if (m <= 0 || m > 512) return std::nullopt;
  const int bucket = m <= 8 ? 1 : m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : m <= 128 ? 128 : m <= 256 ? 256 : 512;
  for (const Entry& e : kTable)
    if (e.n == n && e.k == k && e.m == bucket) {
      if (g128) return wgmma_only ? e.g128_wgmma : e.g128;
      return wgmma_only ? e.pc_wgmma : e.pc;
    }
  return std::nullopt;
}

}  // namespace qserve::cuda
