// Device "cpu-fp16" (backend/cpu/fp16_activation_backend.h): the CPU reference
// with the contract's fp16 activations. Each op's stored float output is the
// plain CPU reference's output rounded to fp16, value for value.
#include <gtest/gtest.h>

#include <random>

#include "core/half.h"
#include "engine/backend_factory.h"

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
}

}  // namespace
}  // namespace qserve
