// The CPU backend's quantized linears equal the contract's integer formulas
// computed independently here (int64 accumulation, spec sections 2-4), and the
// KV4 / KV8 cache numerics hold their bounds (spec section 5).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/kv_quant_backend.h"
#include "backend/cpu/quant_linear_cpu.h"
#include "core/half.h"
#include "quant/quant_linear.h"

#include "random_matrix.h"

namespace qserve {
namespace {

using quant::Matrix;
using quant::QuantizedLinear;
using quant::WeightFormat;

Matrix random_matrix(std::mt19937& rng, int64_t r, int64_t c) {
  Matrix m = test::gaussian_matrix(rng, r, c, 0.05f);
  m.at(0, 1) = 0.9f;  // an outlier
  return m;
}

// Xq, s_x as the spec defines them (fp16 scale, round half to even).
void reference_act(const float* x, int64_t k, std::vector<int>& xq, float& s) {
  float amax = 0;
  for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
  s = round_to_half(amax / 127.0f);
  xq.resize(k);
  for (int64_t i = 0; i < k; ++i) xq[i] = s > 0 ? static_cast<int>(std::clamp(std::nearbyint(x[i] / s), -127.0f, 127.0f)) : 0;
}

class QuantLinearCpu : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(QuantLinearCpu, EqualsTheIntegerFormula) {
  const WeightFormat fmt = GetParam();
  std::mt19937 rng(5);
  const int64_t n = 33, k = 320, m = 7;  // k = 2.5 groups of 128: a partial last group
  const Matrix w = random_matrix(rng, n, k);
  const QuantizedLinear q = quant::quantize_linear(fmt, w, 128);
  auto backend = make_cpu_backend();
  auto linear = cpu::make_quantized_linear(*backend, q);
  Tensor x = backend->alloc(DType::kF32, {m, k});
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& v : x.span<float>()) v = g(rng);
  Activations act = backend->alloc_activations(linear->input_format(), m, k);
  backend->quantize(x, act);
  Tensor y = backend->alloc(DType::kF32, {m, n});
  linear->forward(act, y);

  // W as the kernel's integers: W8hat (g128), raw W4 (per channel), W8.
  const std::vector<float> deq = quant::dequantize_linear(q);
  for (int64_t t = 0; t < m; ++t) {
    std::vector<int> xq;
    float s_x;
    reference_act(x.data_as<float>() + t * k, k, xq, s_x);
    int64_t qsum = 0;
    for (int v : xq) qsum += v;
    for (int64_t o = 0; o < n; ++o) {
      int64_t acc = 0;
      float want = 0;
      if (fmt == WeightFormat::kW4G128) {
        for (int64_t i = 0; i < k; ++i) {
          const int64_t gidx = o * q.g128.groups() + i / 128;
          const int w4 = quant::int4_at(q.g128.qweight.data(), k, o, i);
          acc += static_cast<int64_t>(xq[i]) * ((w4 - q.g128.zero[gidx]) * q.g128.s2[gidx]);
        }
        want = round_to_half(s_x * half_to_float(q.g128.s1[o]) * static_cast<float>(acc));
      } else if (fmt == WeightFormat::kW4PerChannel) {
        for (int64_t i = 0; i < k; ++i) acc += static_cast<int64_t>(xq[i]) * quant::int4_at(q.w4pc.qweight.data(), k, o, i);
        const float s = half_to_float(q.w4pc.scale[o]);
        const float a_sum = round_to_half(s_x * static_cast<float>(qsum));
        want = round_to_half(s_x * s * static_cast<float>(acc) - (s * q.w4pc.zero[o]) * a_sum);
      } else if (fmt == WeightFormat::kW8PerChannel) {
        for (int64_t i = 0; i < k; ++i) acc += static_cast<int64_t>(xq[i]) * q.w8.q[o * k + i];
        want = round_to_half(s_x * half_to_float(q.w8.scale[o]) * static_cast<float>(acc));
      } else {  // W4A16: fp16 inputs times the dequantized weights, FP32 sum
        float sum = 0;
        for (int64_t i = 0; i < k; ++i) sum += round_to_half(x.data_as<float>()[t * k + i]) * deq[o * k + i];
        EXPECT_NEAR(y.data_as<float>()[t * n + o], sum, 2e-3f * (1 + std::fabs(sum)));
        continue;
      }
      EXPECT_EQ(y.data_as<float>()[t * n + o], want) << "t " << t << " o " << o;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantLinearCpu,
                         ::testing::Values(WeightFormat::kW4G128, WeightFormat::kW4PerChannel,
                                           WeightFormat::kW8PerChannel, WeightFormat::kW4A16),
                         [](const auto& info) { return quant::weight_format_name(info.param); });

TEST(KvFakeQuantize, ErrorWithinHalfAStepAndConstantVectorsExact) {
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t d = 64;
  for (KvDtype dtype : {KvDtype::kInt4, KvDtype::kInt8}) {
    std::vector<float> x(4 * d);
    for (auto& v : x) v = round_to_half(g(rng));
    for (int64_t i = 0; i < d; ++i) x[3 * d + i] = 0.3125f;  // max == min
    std::vector<float> y = x;
    cpu::kv_fake_quantize(y.data(), 4, d, dtype);
    for (int64_t r = 0; r < 4; ++r) {
      float mn = x[r * d], mx = x[r * d];
      for (int64_t i = 0; i < d; ++i) mn = std::min(mn, x[r * d + i]), mx = std::max(mx, x[r * d + i]);
      const float step = (mx - mn) / kv_max_code(dtype);
      for (int64_t i = 0; i < d; ++i) {
        if (r == 3) {
          EXPECT_EQ(y[r * d + i], x[r * d + i]) << "constant vector must be exact";
        } else {
          EXPECT_LE(std::fabs(y[r * d + i] - x[r * d + i]), 0.5f * step * 1.02f + 1e-3f) << "kv" << kv_bits(dtype);
        }
      }
    }
  }
}

}  // namespace
}  // namespace qserve
