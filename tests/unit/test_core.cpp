#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace qserve {
namespace {

TEST(Half, RoundTripsEveryHalf) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = half_to_float(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_half(f), h) << i;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // ties to even -> inf
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048.0f), 0x3c00);  // halfway, even stays
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie to even -> 0
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
}

TEST(Tensor, ZerosAndConvert) {
  Tensor t = Tensor::zeros(DType::kF16, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 12u);
  t.data_as<uint16_t>()[4] = float_to_half(2.5f);
  Tensor f = to_f32(t);
  EXPECT_EQ(f.data_as<float>()[4], 2.5f);
  EXPECT_EQ(t.describe(), "F16[2, 3]");
}

TEST(ThreadPool, CoversRangeOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(1000);
  for (int rep = 0; rep < 20; ++rep) {
    pool.parallel_for(1000, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 20);
}

TEST(ThreadPool, GlobalSizeIsFixedOnceCreated) {
  const int n = ThreadPool::global().num_threads();
  EXPECT_TRUE(ThreadPool::set_global_threads(0));  // "default": always fine
  EXPECT_TRUE(ThreadPool::set_global_threads(n));
  EXPECT_FALSE(ThreadPool::set_global_threads(n + 1));
  EXPECT_EQ(ThreadPool::global().num_threads(), n);
}

TEST(Error, CarriesCode) {
  try {
    fail(ErrorCode::kCorruptData, "bad {}", 42);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptData);
    EXPECT_STREQ(e.what(), "bad 42");
  }
}

}  // namespace
}  // namespace qserve
