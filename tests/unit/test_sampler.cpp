// Sampler: masks exact on crafted distributions, the Hugging Face order of the
// stages, seeded determinism, empirical frequencies, agreement with the
// kernel-level sample_token_cpu (what the CUDA sampler matches) where both
// definitions coincide.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cpu/sampling.h"
#include "engine/sampler.h"

namespace qserve {
namespace {

std::vector<int> kept(const std::vector<double>& w) {
  std::vector<int> k;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] > 0) k.push_back(static_cast<int>(i));
  return k;
}

// Powers of two: every sum below is exact in double.
const std::vector<double> kProbs = {0.0625, 0.5, 0.03125, 0.25, 0.125, 0.03125};

TEST(SamplerMasks, TopKExact) {
  auto w = kProbs;
  mask_top_k(w, 2);
  EXPECT_EQ(kept(w), (std::vector<int>{1, 3}));
  w = kProbs;
  mask_top_k(w, 5);  // the 5th is tied with the 6th: both stay
  EXPECT_EQ(kept(w), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  w = kProbs;
  mask_top_k(w, 0);
  EXPECT_EQ(kept(w).size(), 6u);
}

TEST(SamplerMasks, TopPExact) {
  auto w = kProbs;
  mask_top_p(w, 0.75);  // 0.5 + 0.25 reaches 0.75
  EXPECT_EQ(kept(w), (std::vector<int>{1, 3}));
  w = kProbs;
  mask_top_p(w, 0.76);  // needs 0.125 too
  EXPECT_EQ(kept(w), (std::vector<int>{1, 3, 4}));
  w = kProbs;
  mask_top_p(w, 0.1);  // the top token alone
  EXPECT_EQ(kept(w), (std::vector<int>{1}));
  w = kProbs;
  mask_top_p(w, 0.95);  // 0.9375 + one of the tied 0.03125: both tied stay
  EXPECT_EQ(kept(w), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(SamplerMasks, MinPExact) {
  auto w = kProbs;
  mask_min_p(w, 0.25);  // keep p >= 0.125
  EXPECT_EQ(kept(w), (std::vector<int>{1, 3, 4}));
  w = kProbs;
  mask_min_p(w, 0.5);
  EXPECT_EQ(kept(w), (std::vector<int>{1, 3}));
}

TEST(SamplerMasks, TopPWorksOnTheTopKMass) {
  // Hugging Face / vLLM: top-p over the top-k renormalized distribution.
  // [0.4, 0.3, 0.2, 0.1], k = 2, p = 0.5: 0.4 / 0.7 >= 0.5 keeps one token
  // (top-p on the full distribution would keep two).
  std::vector<double> w = {0.4, 0.3, 0.2, 0.1};
  mask_top_k(w, 2);
  mask_top_p(w, 0.5);
  EXPECT_EQ(kept(w), (std::vector<int>{0}));
}

TEST(SamplerMasks, TemperatureAndDraw) {
  std::vector<float> logits = {std::log(0.25f), std::log(0.5f), std::log(0.25f)};
  std::vector<double> w(3);
  temperature_weights(logits, 1.0f, w);
  EXPECT_NEAR(w[0], 0.5, 1e-6);
  EXPECT_DOUBLE_EQ(w[1], 1.0);
  temperature_weights(logits, 0.5f, w);  // squares the ratios
  EXPECT_NEAR(w[0], 0.25, 1e-6);
  const std::vector<double> d = {0, 1, 0, 3};
  EXPECT_EQ(draw_from_weights(d, 0.0f), 1);
  EXPECT_EQ(draw_from_weights(d, 0.24f), 1);
  EXPECT_EQ(draw_from_weights(d, 0.25f), 3);
  EXPECT_EQ(draw_from_weights(d, 0.99f), 3);
}

TEST(Sampler, GreedyAndRepetitionPenalty) {
  GenerationParams p;
  p.temperature = 0;
  Sampler s(p);
  const std::vector<float> logits = {2.0f, -1.0f, 1.9f, 2.0f};
  EXPECT_EQ(s.sample(logits, {}), 0);  // ties: the lowest id
  p.repetition_penalty = 2.0f;
  Sampler r(p);
  const std::vector<int32_t> context = {0, 3, 1, 0};
  EXPECT_EQ(r.sample(logits, context), 2);  // 2 / 2 = 1 < 1.9
  std::vector<float> l = logits;
  apply_repetition_penalty(l, context, 2.0f);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -2.0f, 1.9f, 1.0f}));
}

std::vector<float> random_logits(std::mt19937& rng, int vocab) {
  std::normal_distribution<float> n(0.f, 3.f);
  std::vector<float> l(vocab);
  for (auto& x : l) x = n(rng);
  return l;
}

TEST(Sampler, SameSeedSameTokens) {
  GenerationParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  p.seed = 1234;
  std::mt19937 rng(1);
  std::vector<std::vector<float>> steps;
  for (int i = 0; i < 64; ++i) steps.push_back(random_logits(rng, 500));
  auto run = [&](const GenerationParams& params) {
    Sampler s(params);
    std::vector<int32_t> out;
    for (const auto& l : steps) out.push_back(s.sample(l, out));
    return out;
  };
  const auto a = run(p), b = run(p);
  EXPECT_EQ(a, b);
  p.seed = 1235;
  EXPECT_NE(run(p), a);
  GenerationParams unseeded = p;
  unseeded.seed.reset();
  EXPECT_NE(Sampler(unseeded).seed(), Sampler(unseeded).seed());
}

TEST(Sampler, FrequenciesFollowTheKeptDistribution) {
  // p = [0.5, 0.25, 0.125, 0.0625, 0.0625]; top-k 3 leaves [4/7, 2/7, 1/7].
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.0625f),
                                     std::log(0.0625f)};
  GenerationParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.seed = 99;
  Sampler s(p);
  std::vector<int> count(5, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) count[s.sample(logits, {})]++;
  EXPECT_EQ(count[3] + count[4], 0);
  EXPECT_NEAR(count[0] / double(n), 4.0 / 7, 0.01);
  EXPECT_NEAR(count[1] / double(n), 2.0 / 7, 0.01);
  EXPECT_NEAR(count[2] / double(n), 1.0 / 7, 0.01);
  // min-p 0.3 keeps p >= 0.15: tokens 0 and 1, in a 2:1 ratio.
  p.top_k = 0;
  p.min_p = 0.3f;
  Sampler m(p);
  std::fill(count.begin(), count.end(), 0);
  for (int i = 0; i < n; ++i) count[m.sample(logits, {})]++;
  EXPECT_EQ(count[2] + count[3] + count[4], 0);
  EXPECT_NEAR(count[0] / double(n), 2.0 / 3, 0.01);
}

TEST(Sampler, AgreesWithTheKernelSampler) {
  // sample_token_cpu applies top-p over the whole mass and has no min-p; with
  // top-p alone or top-k alone (after the repetition penalty), the two coincide.
  std::mt19937 rng(5);
  int compared = 0;
  for (int rep = 0; rep < 300; ++rep) {
    GenerationParams p;
    p.temperature = 0.3f + 0.2f * (rep % 7);
    if (rep % 3 == 0) p.top_k = 1 + rep % 40;
    if (rep % 3 == 1) p.top_p = 0.5f + 0.05f * (rep % 10);
    if (rep % 5 == 0) p.repetition_penalty = 1.3f;
    p.seed = 1000 + rep;
    const auto logits = random_logits(rng, 300);
    const std::vector<int32_t> context = {1, 5, 7, 5};
    auto penalized = logits;
    apply_repetition_penalty(penalized, context, p.repetition_penalty);
    SamplingParams kp;
    kp.temperature = p.temperature;
    kp.top_k = p.top_k;
    kp.top_p = p.top_p;
    kp.seed = *p.seed;
    Sampler s(p);
    for (int step = 0; step < 3; ++step) {
      const int32_t mine = s.sample(logits, context);
      const int32_t kernel = sample_token_cpu(penalized.data(), static_cast<int32_t>(penalized.size()), kp, step);
      EXPECT_EQ(mine, kernel) << "rep " << rep << " step " << step;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 900);
}

}  // namespace
}  // namespace qserve
