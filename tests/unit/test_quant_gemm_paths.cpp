// The VNNI paths of the CPU integer GEMM (backend/cpu/gemm_w4a8.h) equal the
// scalar reference exactly, for odd shapes (tails of the 64- and 32-byte steps,
// partial 4 x 4 tiles) and for the extreme values of both operands.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cpu/gemm_w4a8.h"

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

TEST(S8GemmPaths, Avx512VnniEqualsScalar) { check_path(S8GemmPath::kAvx512Vnni); }
TEST(S8GemmPaths, AvxVnniEqualsScalar) { check_path(S8GemmPath::kAvxVnni); }
TEST(S8GemmPaths, DefaultPathIsSupported) {
  EXPECT_TRUE(s8_gemm_path_supported(s8_gemm_default_path())) << s8_gemm_path_name(s8_gemm_default_path());
}

}  // namespace
}  // namespace qserve::cpu
