#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

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

// float_to_half against the compiler's own conversion to _Float16 (IEEE
// round to nearest even, done in software on x86 without F16C): every tie
// between two finite halves and the floats either side of it, and a stride
// through all 2^32 bit patterns (NaNs: any NaN).
TEST(Half, MatchesTheCompilersFloat16Conversion) {
#ifdef __FLT16_MAX__
  auto check = [](float f) {
    const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    const uint16_t got = float_to_half(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(half_to_float(got))) << std::bit_cast<uint32_t>(f);
    } else {
      ASSERT_EQ(got, want) << "float bits 0x" << std::hex << std::bit_cast<uint32_t>(f);
    }
  };
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // positive finite halves and their successor
    const float mid = 0.5f * (half_to_float(static_cast<uint16_t>(h)) + half_to_float(static_cast<uint16_t>(h + 1)));
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      check(f);
      check(-f);
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099) check(std::bit_cast<float>(static_cast<uint32_t>(bits)));
#else
  GTEST_SKIP() << "no _Float16 in this compiler (__FLT16_MAX__ undefined): no reference conversion to compare with";
#endif
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

// Short loops back to back, of varying sizes and grains, with and without a
// pause between them (workers then poll or sleep: thread_pool.h), and a pool
// destroyed while its workers poll: every index once per loop.
TEST(ThreadPool, ShortLoopsBackToBackCoverTheirRanges) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<int> hits(1000, 0), expected(1000, 0);
    for (int rep = 0; rep < 3000; ++rep) {
      const int64_t n = 1 + (rep * 7919) % 1000;
      for (int64_t i = 0; i < n; ++i) expected[i]++;
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;  // chunks are disjoint: no two threads touch an index
      }, 1 + rep % 5);
      if (rep % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers asleep
    }
    EXPECT_EQ(hits, expected) << threads << " threads";
  }
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
