// GPU sampling against the CPU reference: greedy exact; seeded top-k / top-p
// draws pick the CPU's token (the two sum the kept mass in different orders,
// so a draw falling within rounding of a boundary may differ: allowed rarely).
#include <gtest/gtest.h>

#include "backend/cpu/sampling.h"
#include "backend/cuda/kernels/sampling.h"
#include "cuda_test_util.h"

namespace qserve::test {
namespace {

TEST(SamplingCuda, MatchesCpuReference) {
  QS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(7);
  const int vocab = 32003, batch = 64;
  std::normal_distribution<float> n(0.f, 3.f);
  std::vector<float> logits(static_cast<size_t>(batch) * vocab);
  for (auto& x : logits) x = n(rng);
  logits[5 * vocab + 17] = logits[5 * vocab + 3] = 100.f;  // a tie for the argmax
  std::vector<SamplingParams> params(batch);
  std::vector<uint64_t> steps(batch);
  for (int r = 0; r < batch; ++r) {
    params[r].seed = 1000 + r;
    steps[r] = r * 3;
    switch (r % 5) {
      case 0: params[r].temperature = 0.f; break;                                        // greedy
      case 1: params[r].temperature = 1.f; params[r].top_k = 1 + r; break;               // top-k
      case 2: params[r].temperature = 0.7f; params[r].top_p = 0.9f; break;               // top-p
      case 3: params[r].temperature = 1.3f; params[r].top_k = 50; params[r].top_p = 0.5f; break;
      case 4: params[r].temperature = 1.f; break;                                        // full distribution
    }
  }
  DeviceBuffer<float> dl(logits);
  DeviceBuffer<SamplingParams> dp(params);
  DeviceBuffer<uint64_t> ds(steps);
  DeviceBuffer<int32_t> dt(batch);
  QS_CUDA_OK(cuda::sample_tokens({dl.get(), dp.get(), ds.get(), dt.get(), batch, vocab}, nullptr));
  QS_CUDA_OK(cudaDeviceSynchronize());
  const auto got = dt.download();
  int differ = 0;
  for (int r = 0; r < batch; ++r) {
    const int want = sample_token_cpu(logits.data() + static_cast<size_t>(r) * vocab, vocab, params[r], steps[r]);
    ASSERT_GE(got[r], 0);
    ASSERT_LT(got[r], vocab);
    if (params[r].temperature <= 0.f) EXPECT_EQ(got[r], want) << "greedy row " << r;
    differ += got[r] != want;
  }
  EXPECT_LE(differ, 1) << "sampled tokens differing from the CPU reference";
}

}  // namespace
}  // namespace qserve::test
