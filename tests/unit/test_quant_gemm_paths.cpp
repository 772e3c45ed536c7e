// The VNNI paths of the CPU integer GEMM (backend/cpu/gemm_w4a8.h) equal the
// scalar reference exactly, for odd shapes (tails of the 64- and 32-byte steps,
// partial 4 x 4 tiles) and for the extreme values of both operands; the
// layer GEMMs through INT8 rows prepared once give the bits of the per-call
// form and the INT32 sums of a direct int64 loop.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cpu/gemm_w4a8.h"
#include "core/half.h"

namespace qserve::cpu {
namespace {

void check_path(S8GemmPath path) {
  if (!s8_gemm_path_supported(path)) GTEST_SKIP() << "skipped: this CPU has no " << s8_gemm_path_name(path);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> xd(-127, 127), wd(-128, 127);
  for (int64_t m : {1, 3, 4, 5, 17})
    for (int64_t n : {1, 5, 16, 33})
      for (int64_t k : {2, 30, 64, 100, 576, 1536}) {
        std::vector<int8_t> x(m * k), w(n * k);
        for (auto& v : x) v = static_cast<int8_t>(xd(rng));
        for (auto& v : w) v = static_cast<int8_t>(wd(rng));
        if (k == 576) {  // extremes: the largest products and the bias correction's range
          for (int64_t i = 0; i < m * k; ++i) x[i] = (i % 3) ? -127 : 127;
          for (int64_t i = 0; i < n * k; ++i) w[i] = (i % 2) ? -128 : 127;
        }
        std::vector<int32_t> ref(m * n, 7), got(m * n, -7);
        gemm_s8s8_s32(x.data(), w.data(), m, n, k, ref.data(), S8GemmPath::kScalar);
        gemm_s8s8_s32(x.data(), w.data(), m, n, k, got.data(), path);
        ASSERT_EQ(got, ref) << s8_gemm_path_name(path) << " m " << m << " n " << n << " k " << k;
        // The scalar reference itself against a naive int64 sum.
        for (int64_t t = 0; t < m; ++t)
          for (int64_t o = 0; o < n; ++o) {
            int64_t s = 0;
            for (int64_t i = 0; i < k; ++i) s += static_cast<int64_t>(x[t * k + i]) * w[o * k + i];
            ASSERT_EQ(ref[t * n + o], s);
          }
      }
}

// acc [m, n] of xq [m, k] and INT8 rows q [n, k] as plain int64 sums.
std::vector<int32_t> direct_acc(const std::vector<int8_t>& x, const std::vector<int8_t>& q, int64_t m, int64_t n, int64_t k) {
  std::vector<int32_t> acc(m * n);
  for (int64_t t = 0; t < m; ++t)
    for (int64_t o = 0; o < n; ++o) {
      int64_t s = 0;
      for (int64_t i = 0; i < k; ++i) s += static_cast<int64_t>(x[t * k + i]) * q[o * k + i];
      acc[t * n + o] = static_cast<int32_t>(s);
    }
  return acc;
}

// Prepared rows (S8Weights) against the per-call form, for every integer
// format, with the packed codes dropped after preparing (as the CPU backend's
// layers do): same accumulators, same fp16 outputs; the accumulators equal the
// direct sums over the format's own INT8 rows.
TEST(S8GemmPaths, PreparedWeightsGiveThePerCallBits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> wd(0.0f, 0.02f);
  std::uniform_int_distribution<int> xd(-127, 127);
  for (int64_t m : {1, 2, 3, 5, 9})
    for (int64_t n : {5, 37})
      for (int64_t k : {128, 384, 576}) {
        std::vector<float> wf(n * k);
        for (auto& v : wf) v = wd(rng);
        std::vector<int8_t> x(m * k);
        for (auto& v : x) v = static_cast<int8_t>(xd(rng));
        std::vector<uint16_t> s_x(m), a_sum(m);
        for (int64_t t = 0; t < m; ++t) {
          s_x[t] = float_to_half(0.01f + 0.001f * t);
          int64_t sum = 0;
          for (int64_t i = 0; i < k; ++i) sum += x[t * k + i];
          a_sum[t] = float_to_half(half_to_float(s_x[t]) * sum);
        }
        const std::string where = "m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k);
        std::vector<int32_t> acc_call(m * n, 1), acc_prep(m * n, -1);
        std::vector<uint16_t> y_call(m * n, 0x7e00), y_prep(m * n, 0x7c00);  // NaN / inf before the runs
        // The prepared form against the direct sums over `rows` and the per-call form.
        const auto expect_same = [&](const char* format, const std::vector<int8_t>& rows) {
          EXPECT_EQ(acc_prep, direct_acc(x, rows, m, n, k)) << format << " " << where;
          EXPECT_EQ(acc_prep, acc_call) << format << " " << where;
          EXPECT_EQ(y_prep, y_call) << format << " " << where;
        };
        {
          quant::W4G128Weights w = quant::quantize_w4_g128(wf, n, k);
          const std::vector<int8_t> rows = quant::dequantize_level2(w);
          gemm_w4a8_g128(x.data(), s_x.data(), m, w, acc_call.data(), y_call.data());
          const S8Weights prepared = prepare_s8_weights(w);
          w.qweight.clear();
          gemm_w4a8_g128(x.data(), s_x.data(), m, w, prepared, acc_prep.data(), y_prep.data());
          expect_same("g128", rows);
        }
        {
          quant::W4PerChannelWeights w = quant::quantize_w4_per_channel(wf, n, k);
          const std::vector<uint8_t> codes = quant::unpack_int4(w.qweight, n, k);
          gemm_w4a8_per_channel(x.data(), s_x.data(), a_sum.data(), m, w, acc_call.data(), y_call.data());
          const S8Weights prepared = prepare_s8_weights(w);
          w.qweight.clear();
          gemm_w4a8_per_channel(x.data(), s_x.data(), a_sum.data(), m, w, prepared, acc_prep.data(), y_prep.data());
          expect_same("per-channel", std::vector<int8_t>(codes.begin(), codes.end()));
        }
        {
          quant::W8PerChannelWeights w = quant::quantize_w8_per_channel(wf, n, k);
          const std::vector<int8_t> rows = w.q;
          gemm_w8a8(x.data(), s_x.data(), m, w, acc_call.data(), y_call.data());
          const S8Weights prepared = prepare_s8_weights(w);
          w.q.clear();
          gemm_w8a8(x.data(), s_x.data(), m, w, prepared, acc_prep.data(), y_prep.data());
          expect_same("w8a8", rows);
        }
      }
}

TEST(S8GemmPaths, Avx512VnniEqualsScalar) { check_path(S8GemmPath::kAvx512Vnni); }
TEST(S8GemmPaths, AvxVnniEqualsScalar) { check_path(S8GemmPath::kAvxVnni); }
TEST(S8GemmPaths, DefaultPathIsSupported) {
  EXPECT_TRUE(s8_gemm_path_supported(s8_gemm_default_path())) << s8_gemm_path_name(s8_gemm_default_path());
}

}  // namespace
}  // namespace qserve::cpu
