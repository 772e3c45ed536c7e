// GPTQ error compensation (quant/gptq.h): the factor is H^-1's Cholesky
// factor, GPTQ lowers the layer output error against round to nearest on
// correlated inputs in every weight format, keeps the format's grid and value
// ranges exactly (the protective range of g128 included), and equals round to
// nearest when the inputs are uncorrelated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "quant/gptq.h"
#include "quant/quant_linear.h"
#include "quant/weight_format.h"
#include "random_matrix.h"

namespace qserve::quant {
namespace {

// Correlated inputs [rows, k]: Z [rows, k] mixed by a [k, k] matrix a, plus a
// few large channels (activation outliers).
Matrix mixing(std::mt19937& rng, int64_t k) { return test::gaussian_matrix(rng, k, k, 1.0f / std::sqrt(static_cast<float>(k))); }

Matrix correlated_inputs(std::mt19937& rng, int64_t rows, const Matrix& a) {
  const int64_t k = a.rows;
  const Matrix z = test::gaussian_matrix(rng, rows, k);
  Matrix x(rows, k);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      float s = z.at(r, j);  // identity part keeps H well conditioned
      for (int64_t m = 0; m < k; m += 1) s += 2.0f * z.at(r, m) * a.at(m, j);
      x.at(r, j) = s * (j % 37 == 0 ? 6.0f : 1.0f);
    }
  return x;
}

std::vector<int> codes_of(const QuantizedLinear& q) {
  std::vector<int> c(static_cast<size_t>(q.n * q.k));
  for (int64_t o = 0; o < q.n; ++o)
    for (int64_t i = 0; i < q.k; ++i) {
      switch (q.format) {
        case WeightFormat::kW4G128: c[o * q.k + i] = int4_at(q.g128.qweight.data(), q.k, o, i); break;
        case WeightFormat::kW4PerChannel: c[o * q.k + i] = int4_at(q.w4pc.qweight.data(), q.k, o, i); break;
        case WeightFormat::kW4A16: c[o * q.k + i] = int4_at(q.w4a16.qweight.data(), q.k, o, i); break;
        case WeightFormat::kW8PerChannel: c[o * q.k + i] = q.w8.q[o * q.k + i]; break;
        case WeightFormat::kF16: break;
      }
    }
  return c;
}

TEST(Gptq, FactorIsCholeskyOfInverseHessian) {
  std::mt19937 rng(1);
  const int64_t k = 40, rows = 200;
  const Matrix x = correlated_inputs(rng, rows, mixing(rng, k));
  const GptqFactor f = gptq_factor(x, {.damp = 0.01, .act_order = false});
  ASSERT_EQ(f.k, k);
  // H + damp * mean(diag) I, in double.
  std::vector<double> h(k * k, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) h[i * k + j] += static_cast<double>(x.at(r, i)) * x.at(r, j) / rows;
  double mean = 0;
  for (int64_t i = 0; i < k; ++i) mean += h[i * k + i] / k;
  for (int64_t i = 0; i < k; ++i) h[i * k + i] += f.damp_used * mean;
  // U upper triangular with a positive diagonal, and (U^T U) H = I.
  double worst = 0;
  for (int64_t i = 0; i < k; ++i) {
    EXPECT_GT(f.u[i * k + i], 0.0f);
    for (int64_t j = 0; j < i; ++j) EXPECT_EQ(f.u[i * k + j], 0.0f);
  }
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double s = 0;
      for (int64_t m = 0; m < k; ++m) {
        double hinv_im = 0;  // (U^T U)[i, m]
        for (int64_t p = 0; p <= std::min(i, m); ++p) hinv_im += static_cast<double>(f.u[p * k + i]) * f.u[p * k + m];
        s += hinv_im * h[m * k + j];
      }
      worst = std::max(worst, std::fabs(s - (i == j ? 1.0 : 0.0)));
    }
  EXPECT_LT(worst, 1e-3);
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(f.perm[i], i);
  // act_order: a permutation, by descending H[i, i].
  const GptqFactor fa = gptq_factor(x, {.damp = 0.01, .act_order = true});
  std::vector<int64_t> sorted = fa.perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(sorted[i], i);
  for (int64_t i = 1; i < k; ++i) EXPECT_GE(h[fa.perm[i - 1] * k + fa.perm[i - 1]], h[fa.perm[i] * k + fa.perm[i]]);
}

class GptqFormats : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(GptqFormats, LowersLayerOutputErrorOnCorrelatedInputs) {
  std::mt19937 rng(7);
  const int64_t n = 48, k = 320, rows = 1024;  // k = 2.5 groups of 128: a partial last group
  const Matrix a = mixing(rng, k);
  const Matrix x = correlated_inputs(rng, rows, a);
  const Matrix w = test::gaussian_matrix(rng, n, k, 0.05f);
  const GptqFactor f = gptq_factor(x);
  const QuantizedLinear rtn = quantize_linear(GetParam(), w, 128);
  const QuantizedLinear gq = gptq_quantize_linear(GetParam(), w, w, 128, f);
  const double e_rtn = layer_output_error(x, w, rtn), e_gptq = layer_output_error(x, w, gq);
  EXPECT_LT(e_gptq, 0.7 * e_rtn) << "GPTQ " << e_gptq << " vs round to nearest " << e_rtn;
  const QuantizedLinear gq_seq = gptq_quantize_linear(GetParam(), w, w, 128, gptq_factor(x, {.act_order = false}));
  EXPECT_LT(layer_output_error(x, w, gq_seq), 0.7 * e_rtn) << "GPTQ without act_order";
  // And on held-out inputs from the same distribution (not just the calibration rows).
  const Matrix x2 = correlated_inputs(rng, 512, a);
  EXPECT_LT(layer_output_error(x2, w, gq), layer_output_error(x2, w, rtn));
}

TEST_P(GptqFormats, KeepsTheGridAndEqualsRoundToNearestWithoutCorrelation) {
  std::mt19937 rng(3);
  const int64_t n = 16, k = 256;
  // x = I: H is diagonal, so no error flows between columns.
  Matrix x(k, k);
  for (int64_t i = 0; i < k; ++i) x.at(i, i) = 1.0f + 0.01f * static_cast<float>(i % 7);
  const Matrix w = test::gaussian_matrix(rng, n, k, 0.1f);
  const QuantizedLinear rtn = quantize_linear(GetParam(), w, 128);
  const QuantizedLinear gq = gptq_quantize_linear(GetParam(), w, w, 128, gptq_factor(x));
  EXPECT_EQ(codes_of(gq), codes_of(rtn));
}

INSTANTIATE_TEST_SUITE_P(AllFormats, GptqFormats,
                         ::testing::Values(WeightFormat::kW4G128, WeightFormat::kW4PerChannel, WeightFormat::kW4A16,
                                           WeightFormat::kW8PerChannel));

// g128: GPTQ only picks codes; s1, s2 and zero are those of round to nearest of the
// grid weights, and every level-2 value stays in [-128, 127] (the wrap-around
// dequantization equals the exact formula) even for adversarial weights whose
// groups touch the protective range and whose errors are pushed hard by
// strongly correlated inputs.
TEST(Gptq, G128FormatStaysExactAndInsideTheProtectiveRange) {
  std::mt19937 rng(11);
  const int64_t n = 64, k = 384, rows = 256;
  Matrix w = test::gaussian_matrix(rng, n, k, 0.02f);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(k) - 1);
  for (int64_t o = 0; o < n; ++o) {
    w.at(o, pick(rng)) = 1.0f;                       // the row max: 119 after level 1
    for (int j = 0; j < 3; ++j) w.at(o, pick(rng)) = -0.95f;  // groups near [-113, 119]
  }
  // Nearly collinear inputs: large off-diagonal H, large error transfers.
  Matrix x = test::gaussian_matrix(rng, rows, k, 0.05f);
  const Matrix common = test::gaussian_matrix(rng, rows, 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) x.at(r, i) += common.at(r, 0) * ((i % 3) ? 1.0f : -1.0f);
  Matrix grid = w;  // a clipped grid, as the clipping search would set it
  for (auto& v : grid.data) v = std::clamp(v, -0.9f, 0.9f);
  const QuantizedLinear rtn = quantize_linear(WeightFormat::kW4G128, grid, 128);
  const QuantizedLinear gq = gptq_quantize_linear(WeightFormat::kW4G128, w, grid, 128, gptq_factor(x));
  EXPECT_EQ(gq.g128.s1, rtn.g128.s1);
  EXPECT_EQ(gq.g128.s2, rtn.g128.s2);
  EXPECT_EQ(gq.g128.zero, rtn.g128.zero);
  EXPECT_NE(codes_of(gq), codes_of(rtn));  // error feedback changed codes
  const std::vector<int8_t> w8 = dequantize_level2(gq.g128);  // QS_CHECKs [-128, 127]
  const int64_t groups = gq.g128.groups();
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t g = o * groups + i / 128;
      const uint8_t s2 = gq.g128.s2[g], z = gq.g128.zero[g];
      const int exact = level2_dequant_exact(int4_at(gq.g128.qweight.data(), k, o, i), s2, z);
      ASSERT_GE(exact, -128);
      ASSERT_LE(exact, 127);
      const uint32_t lanes = level2_dequant_wrap4(int4_at(gq.g128.qweight.data(), k, o, i), s2, scaled_zero(s2, z));
      EXPECT_EQ(static_cast<int8_t>(lanes & 0xff), exact);
      EXPECT_EQ(w8[o * k + i], exact);
    }
  EXPECT_LT(layer_output_error(x, w, gq), layer_output_error(x, w, rtn));
}

TEST(Gptq, RowCapBoundsTheDominantRows) {
  // Two rows 100x larger than the others (attention sinks): with row_cap C, H is that of
  // the same rows with those two scaled down to a squared norm of C x the median.
  std::mt19937 rng(6);
  const int64_t k = 48, rows = 160;
  Matrix x = test::gaussian_matrix(rng, rows, k);
  for (int64_t i = 0; i < k; ++i) x.at(0, i) *= 100.0f, x.at(77, i) *= 100.0f;
  std::vector<double> n2(rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) n2[r] += static_cast<double>(x.at(r, i)) * x.at(r, i);
  std::vector<double> sorted = n2;
  std::nth_element(sorted.begin(), sorted.begin() + rows / 2, sorted.end());
  const double cap = 4.0, bound = cap * sorted[rows / 2];
  Matrix capped = x;
  int scaled = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (n2[r] > bound) {
      ++scaled;
      for (int64_t i = 0; i < k; ++i) capped.at(r, i) *= static_cast<float>(std::sqrt(bound / n2[r]));
    }
  EXPECT_GE(scaled, 2);
  const GptqFactor want = gptq_factor(capped, {.row_cap = 0});
  const GptqFactor got = gptq_factor(x, {.row_cap = cap});
  const GptqFactor plain = gptq_factor(x, {.row_cap = 0});
  ASSERT_EQ(got.perm, want.perm);
  double diff = 0, diff_plain = 0, scale = 0;
  for (size_t i = 0; i < want.u.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got.u[i] - want.u[i])));
    diff_plain = std::max(diff_plain, static_cast<double>(std::fabs(plain.u[i] - want.u[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want.u[i])));
  }
  EXPECT_LT(diff, 1e-4 * scale);
  EXPECT_GT(diff_plain, 1e-2 * scale);  // the cap changed H
}

TEST(Gptq, DeadChannelsAndShapeChecks) {
  std::mt19937 rng(5);
  const int64_t n = 8, k = 64;
  Matrix x = test::gaussian_matrix(rng, 100, k);
  for (int64_t r = 0; r < x.rows; ++r) x.at(r, 10) = 0.0f;  // never active
  const GptqFactor f = gptq_factor(x);
  for (float v : f.u) ASSERT_TRUE(std::isfinite(v));
  const Matrix w = test::gaussian_matrix(rng, n, k, 0.1f);
  const QuantizedLinear q = gptq_quantize_linear(WeightFormat::kW4PerChannel, w, w, 128, f);
  EXPECT_EQ(q.n, n);
  QuantizedLinear wrong = quantize_linear(WeightFormat::kW4PerChannel, test::gaussian_matrix(rng, n, 32), 128);
  EXPECT_DEATH_IF_SUPPORTED(gptq_requantize(wrong, w, f), "GPTQ");
}

}  // namespace
}  // namespace qserve::quant
