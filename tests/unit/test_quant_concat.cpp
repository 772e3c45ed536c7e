// quant::concat_output_channels: layers stacked along the output channels are
// the quantization of the stacked matrix, bit for bit, in every format (the
// fused q / k / v and gate / up linears rest on this).
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "quant/quant_linear.h"

#include "random_matrix.h"
#include "same_quantized_linear.h"

namespace qserve {
namespace {

using quant::Matrix;
using quant::QuantizedLinear;
using quant::WeightFormat;

using test::expect_same_linear;

class QuantConcat : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(QuantConcat, EqualsTheQuantizationOfTheStackedMatrix) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  // q / k / v of a small GQA layer: 48 + 16 + 16 rows; k = 320 (g128: two
  // whole groups and a partial third, as a k that is not a multiple of 128).
  const int64_t k = 320, group = 128;
  const int64_t rows[] = {48, 16, 16};
  Matrix stacked(48 + 16 + 16, k);
  std::vector<QuantizedLinear> parts;
  int64_t r0 = 0;
  for (const int64_t n : rows) {
    Matrix m = test::gaussian_matrix(rng, n, k, 0.05f);
    m.at(n - 1, 3) = 0.7f;  // an outlier row
    std::copy(m.data.begin(), m.data.end(), stacked.data.begin() + r0 * k);
    parts.push_back(quant::quantize_linear(GetParam(), m, group));
    r0 += n;
  }
  const QuantizedLinear want = quant::quantize_linear(GetParam(), stacked, group);
  const QuantizedLinear got = quant::concat_output_channels(std::move(parts));
  expect_same_linear(got, want);
  EXPECT_EQ(quant::dequantize_linear(got), quant::dequantize_linear(want));
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantConcat,
                         ::testing::Values(WeightFormat::kF16, WeightFormat::kW4G128, WeightFormat::kW4PerChannel,
                                           WeightFormat::kW8PerChannel, WeightFormat::kW4A16),
                         [](const auto& info) { return quant::weight_format_name(info.param); });

TEST(QuantConcatErrors, MismatchedLayersAreRefused) {
  std::mt19937 rng(7);
  const Matrix a = test::gaussian_matrix(rng, 8, 256, 0.05f), b = test::gaussian_matrix(rng, 8, 128, 0.05f);
  auto code = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code([] { quant::concat_output_channels({}); }), ErrorCode::kInvalidArgument);
  // another k
  EXPECT_EQ(code([&] {
              quant::concat_output_channels({quant::quantize_linear(WeightFormat::kW4G128, a, 128),
                                             quant::quantize_linear(WeightFormat::kW4G128, b, 128)});
            }),
            ErrorCode::kInvalidArgument);
  // another format
  EXPECT_EQ(code([&] {
              quant::concat_output_channels({quant::quantize_linear(WeightFormat::kW4G128, a, 128),
                                             quant::quantize_linear(WeightFormat::kW4PerChannel, a, 128)});
            }),
            ErrorCode::kInvalidArgument);
  // another group
  EXPECT_EQ(code([&] {
              quant::concat_output_channels({quant::quantize_linear(WeightFormat::kW4A16, a, 128),
                                             quant::quantize_linear(WeightFormat::kW4A16, a, 64)});
            }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace qserve
