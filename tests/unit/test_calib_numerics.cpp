// The calibration forward's imitation of the run-time numerics (quant/calib_forward.h):
// fake-quantized activations and KV equal the contract's quantize-then-dequantize,
// as computed by the reference quantizers (quant/weight_format.h, quant/kv_format.h).
#include <gtest/gtest.h>

#include <random>

#include "core/half.h"
#include "quant/calib_forward.h"
#include "quant/kv_format.h"
#include "quant/weight_format.h"

namespace qserve::quant {
namespace {

std::vector<float> random_rows(int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (auto& v : x) v = g(rng);
  for (int64_t r = 0; r < rows; ++r) x[r * n + (r * 7) % n] *= 20.0f;  // an outlier per row
  return x;
}

TEST(CalibNumerics, Int8RowsMatchTheActivationQuantizer) {
  const int64_t rows = 6, n = 96;
  std::vector<float> x = random_rows(rows, n, 1);
  const std::vector<float> orig = x;
  fake_quantize_rows_int8(x.data(), rows, n);
  int changed = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int8_t> q(n);
    uint16_t scale = 0;
    quantize_activation_row(orig.data() + r * n, n, q.data(), &scale, nullptr);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_FLOAT_EQ(x[r * n + i], half_to_float(scale) * q[i]) << r << "," << i;
      changed += x[r * n + i] != orig[r * n + i];
    }
  }
  EXPECT_GT(changed, rows * n / 2);
}

TEST(CalibNumerics, KvMatchesTheCacheQuantizer) {
  const int64_t rows = 5, heads = 3, d = 64;
  for (int bits : {4, 8}) {
    const KvDtype dt = bits == 4 ? KvDtype::kInt4 : KvDtype::kInt8;
    std::vector<float> x = random_rows(rows, heads * d, 2);
    const std::vector<float> orig = x;
    fake_quantize_kv(x.data(), rows, heads, d, bits);
    double err = 0;
    for (int64_t r = 0; r < rows * heads; ++r) {
      std::vector<uint16_t> h(d);
      for (int64_t i = 0; i < d; ++i) h[i] = float_to_half(orig[r * d + i]);
      std::vector<uint8_t> vals(d);
      uint16_t scale = 0, zero = 0;
      kv_quantize_head(h.data(), static_cast<int>(d), dt, vals.data(), &scale, &zero);
      std::vector<float> want(d);
      kv_dequantize_head(vals.data(), scale, zero, static_cast<int>(d), dt, want.data());
      for (int64_t i = 0; i < d; ++i) {
        EXPECT_FLOAT_EQ(x[r * d + i], want[i]) << bits << " bits, " << r << "," << i;
        err = std::max(err, static_cast<double>(std::fabs(x[r * d + i] - orig[r * d + i])));
      }
    }
    EXPECT_GT(err, 0.0) << bits;
  }
}

}  // namespace
}  // namespace qserve::quant
