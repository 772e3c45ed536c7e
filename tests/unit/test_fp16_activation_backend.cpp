// Device "cpu-fp16" (backend/cpu/fp16_activation_backend.h): the CPU reference
// with the contract's fp16 activations. Each op's stored float output is the
// plain CPU reference's output rounded to fp16, value for value.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/half.h"
#include "backend/cpu/fp16_activation_backend.h"
#include "engine/backend_factory.h"
#include "engine/llama_model.h"
#include "model/checkpoint.h"
#include "model/llama_weights.h"
#include "model/model_config.h"

namespace qserve {
namespace {

Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float scale) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  for (float& v : t.span<float>()) v = d(rng);  // not fp16-exact
  return t;
}

// want = round_to_half(ref) everywhere, and at least some values moved (the inputs are not fp16-exact).
void expect_rounded(const Tensor& got, const Tensor& ref) {
  ASSERT_EQ(got.numel(), ref.numel());
  const auto g = got.span<const float>();
  const auto r = ref.span<const float>();
  int64_t moved = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    ASSERT_EQ(g[i], round_to_half(r[i])) << "at " << i;
    moved += g[i] != r[i];
  }
  EXPECT_GT(moved, got.numel() / 2);
}

TEST(Fp16ActivationBackend, RoundsWhatTheCpuReferenceStores) {
  auto ref = make_backend("cpu");
  auto fp16 = make_backend("cpu-fp16");
  EXPECT_NE(fp16->name().find("fp16"), std::string::npos);
  const int64_t T = 5, K = 37, N = 11;

  // The residual add.
  Tensor x_ref = random_tensor({T, K}, 1, 3.f), x16 = random_tensor({T, K}, 1, 3.f);
  const Tensor d = random_tensor({T, K}, 2, 1.f);
  ref->add(x_ref, d);
  fp16->add(x16, d);
  expect_rounded(x16, x_ref);

  // A float linear layer (bias included).
  const Tensor w = random_tensor({N, K}, 3, 0.2f), b = random_tensor({N}, 4, 0.1f);
  Activations a;
  a.values = random_tensor({T, K}, 5, 1.f);
  Tensor y_ref = Tensor::zeros(DType::kF32, {T, N}), y16 = Tensor::zeros(DType::kF32, {T, N});
  ref->make_linear(w, b)->forward(a, y_ref);
  fp16->make_linear(w, b)->forward(a, y16);
  expect_rounded(y16, y_ref);

  // RMSNorm with float output.
  const Tensor g = random_tensor({K}, 6, 1.f);
  Activations n_ref, n16;
  n_ref.values = Tensor::zeros(DType::kF32, {T, K});
  n16.values = Tensor::zeros(DType::kF32, {T, K});
  ref->rms_norm(a.values, g, 1e-5f, n_ref);
  fp16->rms_norm(a.values, g, 1e-5f, n16);
  expect_rounded(n16.values, n_ref.values);
}

TEST(Fp16ActivationBackend, UnknownDevicesAreRejected) {
  EXPECT_THROW(make_backend("cpu-fp32"), Error);
  EXPECT_THROW(make_backend("cpu-fp16:resid"), Error);
  EXPECT_THROW(make_backend("cpu-fp16:all,mantissa=24"), Error);
  EXPECT_THROW(check_device_name("cpu-fp16:all,-kk"), Error);
  EXPECT_NO_THROW(check_device_name("cpu-fp16:all,-k,mantissa=14"));
}

TEST(Fp16ActivationBackend, PointListsParse) {
  using cpu::Fp16Point;
  using cpu::parse_fp16_points;
  EXPECT_EQ(parse_fp16_points("all").bits, cpu::Fp16Points::all().bits);
  EXPECT_EQ(parse_fp16_points("none").bits, 0u);
  const cpu::Fp16Points no_k = parse_fp16_points("all,-k");
  EXPECT_FALSE(no_k.has(Fp16Point::kK));
  EXPECT_TRUE(no_k.has(Fp16Point::kV) && no_k.has(Fp16Point::kResidual) && no_k.has(Fp16Point::kLogits));
  const cpu::Fp16Points two = parse_fp16_points("residual,attn,mantissa=14");
  EXPECT_EQ(two.bits, static_cast<uint32_t>(Fp16Point::kResidual) | static_cast<uint32_t>(Fp16Point::kAttn));
  EXPECT_EQ(two.mantissa_bits, 14);
  EXPECT_EQ(cpu::fp16_points_name(two), "residual,attn,mantissa=14");
  EXPECT_EQ(cpu::fp16_points_name(no_k), "embed,residual,norm,q,v,q_rope,attn,o,gate,up,silu,down,logits");
  for (const char* bad : {"", "all,", "resid", "-", "mantissa=0", "mantissa=x", "-mantissa=3"})
    EXPECT_THROW(parse_fp16_points(bad), Error) << bad;
}

TEST(Fp16ActivationBackend, RoundsOnlyTheListedPoints) {
  const int64_t T = 4, K = 33;
  const Tensor d = random_tensor({T, K}, 2, 1.f);
  // Residual listed: rounded; not listed: the FP32 result as is.
  auto ref = make_backend("cpu");
  auto resid = make_backend("cpu-fp16:residual");
  auto others = make_backend("cpu-fp16:all,-residual");
  Tensor x_ref = random_tensor({T, K}, 1, 3.f), x_on = random_tensor({T, K}, 1, 3.f), x_off = random_tensor({T, K}, 1, 3.f);
  ref->add(x_ref, d);
  resid->add(x_on, d);
  others->add(x_off, d);
  expect_rounded(x_on, x_ref);
  for (int64_t i = 0; i < T * K; ++i) ASSERT_EQ(x_off.data_as<float>()[i], x_ref.data_as<float>()[i]);

  // Linears take their role from the making order (lm_head, then q, k, v, o, gate, up, down):
  // with only k listed, the second layer linear rounds and the others do not.
  auto konly = make_backend("cpu-fp16:k");
  const Tensor w = random_tensor({5, K}, 3, 0.2f);
  Activations a;
  a.values = random_tensor({T, K}, 5, 1.f);
  Tensor y_ref = Tensor::zeros(DType::kF32, {T, 5});
  ref->make_linear(w, {})->forward(a, y_ref);
  for (int i = 0; i < 8; ++i) {
    auto lin = konly->make_linear(w, {});
    Tensor y = Tensor::zeros(DType::kF32, {T, 5});
    lin->forward(a, y);
    if (i == 2) {
      expect_rounded(y, y_ref);
    } else {
      for (int64_t j = 0; j < y.numel(); ++j) ASSERT_EQ(y.data_as<float>()[j], y_ref.data_as<float>()[j]) << i;
    }
  }
}

// In a model, the first linear made is lm_head: with only "logits" listed, the
// logits are the plain CPU model's rounded to fp16 and nothing else moves.
TEST(Fp16ActivationBackend, LogitsPointIsTheModelsLmHead) {
  auto ckpt = open_checkpoint(std::string(QSERVE_SOURCE_DIR) + "/tests/data/models/tiny-llama");
  const ModelConfig config = ModelConfig::from_json(ckpt->config());
  const LlamaWeights weights = LlamaWeights::load(*ckpt, config);
  auto plain = LlamaModel::create(config, weights, make_backend("cpu"));
  auto logits16 = LlamaModel::create(config, weights, make_backend("cpu-fp16:logits"));
  auto down16 = LlamaModel::create(config, weights, make_backend("cpu-fp16:down"));
  Batch b;
  b.seqs.push_back({0, {1, 7, 3, 12, 5, 9, 2}, 0});
  b.all_logits = true;
  Logits lp, l16, ld;
  plain->forward(b, lp);
  logits16->forward(b, l16);
  down16->forward(b, ld);
  ASSERT_EQ(lp.all.size(), l16.all.size());
  int64_t moved = 0, moved_down = 0;
  for (size_t i = 0; i < lp.all.size(); ++i) {
    ASSERT_EQ(l16.all[i], round_to_half(lp.all[i])) << i;
    moved += l16.all[i] != lp.all[i];
    moved_down += ld.all[i] != lp.all[i];
  }
  EXPECT_GT(moved, 0);
  EXPECT_GT(moved_down, 0);  // another point, another linear: the logits move, unrounded
}

TEST(Fp16ActivationBackend, MantissaRounding) {
  using cpu::round_to_mantissa;
  EXPECT_EQ(round_to_mantissa(1.0f + 0x1p-11f, 10), 1.0f);                // tie: to even
  EXPECT_EQ(round_to_mantissa(1.0f + 3 * 0x1p-11f, 10), 1.0f + 0x1p-9f);  // tie: to even (up)
  EXPECT_EQ(round_to_mantissa(-(1.0f + 0x1.8p-11f), 10), -(1.0f + 0x1p-10f));
  EXPECT_EQ(round_to_mantissa(1.9999999f, 7), 2.0f);                        // carries into the exponent
  EXPECT_EQ(round_to_mantissa(70000.f, 10), 70016.f);                       // no fp16 overflow
  EXPECT_EQ(round_to_mantissa(0.1f, 23), 0.1f);
  // With 10 bits it is fp16 rounding inside fp16's normal range.
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 50.f);
  for (int i = 0; i < 1000; ++i) {
    const float v = dist(rng);
    if (std::fabs(v) >= 0x1p-14f) ASSERT_EQ(round_to_mantissa(v, 10), round_to_half(v)) << v;
  }
}

}  // namespace
}  // namespace qserve
