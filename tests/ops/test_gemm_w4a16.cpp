// The W4A16 GEMM (backend/cuda/gemm_w4a16.h) on the GPU against the CPU
// reference (backend/cpu: fp32 over the dequantized weights), on fresh random
// inputs every run (the seed is printed on failure), outputs poisoned first:
// every streaming tile, the planner's choice, and the dequantize + cuBLAS
// path with a scratch small enough to need several row slices.
// Tolerance: the GPU rounds each dequantized weight to fp16 (relative 2^-11)
// and sums in another order; every element within 4e-3 + 4e-3 |ref| and the
// relative L2 error below 1e-3 (the fp16 output rounding alone is ~3e-4).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cpu/gemm_w4a8.h"
#include "core/half.h"
#include "quant/weight_format.h"

#ifdef QSERVE_HAVE_CUDA
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/gemm_w4a16.h"
#include "cuda_test_util.h"
#endif

namespace qserve {
namespace {

#ifdef QSERVE_HAVE_CUDA

struct W4A16Case {
  int64_t m, n, k;
  int tile;  // a streaming tile, -1: the planner's choice, -2: dequantize + cuBLAS
  size_t scratch = cuda::kW4A16ScratchBytes;
};

std::string w4a16_case_name(const testing::TestParamInfo<W4A16Case>& info) {
  const W4A16Case& c = info.param;
  std::string s = "m" + std::to_string(c.m) + "_n" + std::to_string(c.n) + "_k" + std::to_string(c.k);
  s += c.tile >= 0 ? "_tile" + std::to_string(c.tile) : c.tile == -1 ? "_planner" : "_dequant";
  if (c.scratch != cuda::kW4A16ScratchBytes) s += "_scratch" + std::to_string(c.scratch);
  return s;
}

std::vector<W4A16Case> w4a16_cases() {
  std::vector<W4A16Case> cases;
  // Real layers (Llama-3-8B qkv, down) and the default model's (k = 576: a partial last group), n odd.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 14336}})
    for (int64_t m : {1, 2, 7, 16, 33, 64}) cases.push_back({m, n, k, -1});
  for (auto [n, k] : {std::pair<int64_t, int64_t>{576, 576}, {1536, 576}, {576, 1536}, {203, 448}})
    for (int64_t m : {1, 7, 16, 33, 255, 1024}) cases.push_back({m, n, k, -1});
  // Every streaming tile, m up to and past its token tile (more than one grid row).
  for (int tile = 0; tile < cuda::kW4A16StreamTileCount; ++tile)
    for (int64_t m : {1, 5, 16, 17, 40})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{203, 576}, {4096, 4096}}) cases.push_back({m, n, k, tile});
  // The large-m path at small m too, and with slices of 16 and 48 rows.
  for (int64_t m : {1, 9, 100}) cases.push_back({m, 203, 576, -2});
  cases.push_back({33, 203, 576, -2, size_t{16} * 576 * 2});
  cases.push_back({33, 203, 576, -2, size_t{48} * 576 * 2 + 100});
  return cases;
}

class GemmW4A16 : public testing::TestWithParam<W4A16Case> {};

TEST_P(GemmW4A16, MatchesCpuReference) {
  QS_SKIP_WITHOUT_CUDA();
  const W4A16Case c = GetParam();
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> wd(0.0f, 0.02f);
  std::vector<float> wf(static_cast<size_t>(c.n * c.k));
  for (auto& v : wf) v = wd(rng);
  const quant::W4A16Weights w = quant::quantize_w4a16(wf, c.n, c.k);
  const std::vector<uint16_t> x = test::random_half(rng, static_cast<size_t>(c.m * c.k));
  std::vector<uint16_t> want(static_cast<size_t>(c.m * c.n));
  cpu::gemm_w4a16(x.data(), c.m, w, want.data());

  static cuda::CudaContext ctx(0);
  const cuda::W4A16DeviceWeights dw = cuda::upload_w4a16(w);
  test::DeviceBuffer<uint16_t> dx(x), dy(want.size());  // dy poisoned (0xFFFF: NaN)
  test::DeviceBuffer<uint8_t> scratch(c.scratch);
  if (c.tile == -2) {
    cuda::gemm_w4a16_dequant_cublas(dw, reinterpret_cast<const __half*>(dx.get()), c.m,
                                    reinterpret_cast<__half*>(dy.get()), scratch.get(), c.scratch, ctx.cublas(),
                                    ctx.stream());
  } else {
    cuda::gemm_w4a16(dw, reinterpret_cast<const __half*>(dx.get()), c.m, reinterpret_cast<__half*>(dy.get()),
                     scratch.get(), c.scratch, ctx.cublas(), ctx.stream(), c.tile);
  }
  QS_CUDA_OK(cudaStreamSynchronize(ctx.stream()));
  const test::Fp16Diff d = test::compare_half(dy.download(), want, 4e-3, 4e-3);
  EXPECT_EQ(d.nan, 0);
  EXPECT_EQ(d.bad, 0) << "first bad element " << d.first_bad << ", max |diff| " << d.max_abs;
  EXPECT_LT(d.rel_l2, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Ops, GemmW4A16, testing::ValuesIn(w4a16_cases()), w4a16_case_name);

#else

TEST(GemmW4A16, Skipped) { GTEST_SKIP() << "skipped: no CUDA device (built without CUDA)"; }

#endif

}  // namespace
}  // namespace qserve
