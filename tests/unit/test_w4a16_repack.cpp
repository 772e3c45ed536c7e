// The W4A16 compute order (quant/w4a16_repack.h): a lossless permutation of
// the canonical weights, and each lane's words hold exactly the fp16
// mma.sync m16n8k16 A-fragment halves the kernel's nibble extraction expects.
#include <gtest/gtest.h>

#include <random>

#include "core/half.h"
#include "quant/w4a16_repack.h"

namespace qserve::quant {
namespace {

W4A16Weights random_w4a16(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  W4A16Weights w;
  w.n = n;
  w.k = k;
  w.qweight.resize(static_cast<size_t>(n * k / 2));
  for (auto& b : w.qweight) b = static_cast<uint8_t>(rng());
  const int64_t groups = w.groups();
  w.scale.resize(static_cast<size_t>(n * groups));
  w.zero.resize(static_cast<size_t>(n * groups));
  for (auto& s : w.scale) s = float_to_half(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.0f);
  for (auto& z : w.zero) z = static_cast<uint8_t>(rng() % 16);
  return w;
}

TEST(W4A16Repack, RoundTripsEveryWeight) {
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{48, 256}, {37, 128}, {203, 384}}) {
    const W4A16Weights w = random_w4a16(n, k, static_cast<uint32_t>(n * k));
    const std::vector<uint8_t> packed = repack_w4a16(w);
    ASSERT_EQ(packed.size(), static_cast<size_t>((n + 15) / 16 * (k / 64) * 32 * 16));
    for (int64_t o = 0; o < n; ++o)
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(repacked_w4a16_at(packed, k, o, i), int4_at(w.qweight.data(), k, o, i)) << o << "," << i;
  }
}

TEST(W4A16Repack, LaneWordsAreTheMmaFragments) {
  // Register a_s of lane (g, t), k16 step j = (word_j >> 4s) & 0x000f000f:
  // low half row g + 8 (s & 1), physical k 16t + 4j + 2 (s >> 1); high half the next k.
  const int64_t n = 32, k = 128;
  const W4A16Weights w = random_w4a16(n, k, 7);
  const std::vector<uint8_t> packed = repack_w4a16(w);
  for (int64_t t16 = 0; t16 < n / 16; ++t16)
    for (int64_t kt = 0; kt < k / 64; ++kt)
      for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < 4; ++j) {
          uint32_t word = 0;
          const size_t at = ((static_cast<size_t>(t16) * (k / 64) + kt) * 32 + lane) * 16 + j * 4;
          for (int b = 0; b < 4; ++b) word |= static_cast<uint32_t>(packed[at + b]) << (8 * b);
          const int g = lane / 4, t = lane % 4;
          for (int s = 0; s < 4; ++s) {
            const uint32_t pair = (word >> (4 * s)) & 0x000f000fu;
            const int64_t row = t16 * 16 + g + 8 * (s & 1);
            const int64_t col = kt * 64 + w4a16_physical_k(t, j, 2 * (s >> 1));
            EXPECT_EQ(pair & 0xf, int4_at(w.qweight.data(), k, row, col));
            EXPECT_EQ(pair >> 16, int4_at(w.qweight.data(), k, row, col + 1));
          }
        }
}

TEST(W4A16Repack, GroupParametersPairRowsGAndGPlus8) {
  const W4A16Weights w = random_w4a16(40, 256, 11);  // 3 row tiles, the last half empty
  const std::vector<uint32_t> p = repack_w4a16_params(w);
  const int64_t groups = w.groups();
  ASSERT_EQ(p.size(), static_cast<size_t>(3 * groups * 8 * 2));
  for (int64_t t16 = 0; t16 < 3; ++t16)
    for (int64_t gr = 0; gr < groups; ++gr)
      for (int g = 0; g < 8; ++g) {
        const size_t at = (static_cast<size_t>(t16 * groups + gr) * 8 + g) * 2;
        for (int h = 0; h < 2; ++h) {
          const int64_t row = t16 * 16 + g + 8 * h;
          const uint16_t s = static_cast<uint16_t>(p[at] >> (16 * h)), z = static_cast<uint16_t>(p[at + 1] >> (16 * h));
          if (row < w.n) {
            EXPECT_EQ(s, w.scale[row * groups + gr]);
            EXPECT_EQ(half_to_float(z), 1024.0f + w.zero[row * groups + gr]);
          } else {
            EXPECT_EQ(s, 0);
          }
        }
      }
}

TEST(W4A16Repack, RejectsKNotAMultipleOf64) {
  W4A16Weights w = random_w4a16(16, 128, 1);
  w.k = 96;
  EXPECT_THROW(repack_w4a16(w), std::exception);
}

}  // namespace
}  // namespace qserve::quant
