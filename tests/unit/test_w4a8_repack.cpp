// The compute-order repacking of W4 weights and level-2 parameters for the
// CUDA kernels: every value lands where quant/w4a8_repack.h says.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/error.h"
#include "quant/w4a8_repack.h"
#include "quant/weight_format.h"

namespace qserve {
namespace {

TEST(W4A8Repack, EveryValueFound) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> d(0, 15);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{16, 64}, {40, 192}, {200, 576}, {300, 128}}) {
    std::vector<uint8_t> v(n * k);
    for (auto& x : v) x = static_cast<uint8_t>(d(rng));
    const auto canonical = quant::pack_int4(v, n, k);
    const auto packed = quant::repack_w4_mma(canonical.data(), n, k);
    const int64_t n_pad = (n + 127) / 128 * 128;
    ASSERT_EQ(packed.size(), static_cast<size_t>(n_pad * k / 2));
    for (int64_t o = 0; o < n_pad; ++o)
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(quant::repacked_w4_at(packed, k, o, i), o < n ? v[o * k + i] : 0) << o << " " << i;
  }
}

// A layer repacked block range by block range into a poisoned buffer: the
// same bytes as the whole repack, every byte written (n = 300: the last block
// mostly padding).
TEST(W4A8Repack, BlockRangesMatchTheWholeRepack) {
  std::mt19937 rng(5);
  const int64_t n = 300, k = 192;
  std::vector<uint8_t> canonical(n * k / 2);
  for (auto& b : canonical) b = static_cast<uint8_t>(rng());
  const auto whole = quant::repack_w4_mma(canonical.data(), n, k);
  const int64_t blocks = quant::repacked_blocks(n), bytes = quant::repacked_block_bytes(k);
  ASSERT_EQ(blocks, 3);
  ASSERT_EQ(static_cast<int64_t>(whole.size()), blocks * bytes);
  std::vector<uint8_t> pieces(whole.size(), 0xa5);
  quant::repack_w4_mma_blocks(canonical.data(), n, k, 0, 1, pieces.data());
  quant::repack_w4_mma_blocks(canonical.data(), n, k, 1, 3, pieces.data() + bytes);
  quant::repack_w4_mma_blocks(canonical.data(), n, k, 2, 2, pieces.data());  // empty: writes nothing
  EXPECT_EQ(pieces, whole);
  std::vector<uint8_t> last(bytes, 0xa5);
  quant::repack_w4_mma_blocks(canonical.data(), n, k, 2, 3, last.data());
  EXPECT_TRUE(std::equal(last.begin(), last.end(), whole.begin() + 2 * bytes));
}

TEST(W4A8Repack, FragmentOrderOfOneLane) {
  // Lane 5 (g = 1, q = 1) of tile (0, 0): word 0's low nibbles are row 1, k = 4..7.
  // Tile (1, 1) (channels 16..31, k 64..127) starts 512 bytes after tile (0, 1)
  // and 8 x 512 bytes after tile (0, 0).
  const int64_t n = 32, k = 128;
  std::vector<uint8_t> v(n * k);
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < k; ++i) v[o * k + i] = static_cast<uint8_t>((o + i) % 16);
  const auto packed = quant::repack_w4_mma(quant::pack_int4(v, n, k).data(), n, k);
  const uint8_t* lane5 = packed.data() + 5 * 16;
  for (int w = 0; w < 4; ++w)
    for (int b = 0; b < 4; ++b) {
      const int i = 16 * w + 4 + b;
      EXPECT_EQ(lane5[4 * w + b] & 0x0f, v[1 * k + i]);
      EXPECT_EQ(lane5[4 * w + b] >> 4, v[9 * k + i]);
      const uint8_t* tile11_lane5 = packed.data() + 9 * 512 + 5 * 16;
      EXPECT_EQ(tile11_lane5[4 * w + b] & 0x0f, v[17 * k + 64 + i]);
    }
}

TEST(W4A8Repack, Level2Entries) {
  const int64_t n = 200, groups = 3;  // two 128-channel blocks, the second partly padding
  std::vector<uint8_t> s2(n * groups), z(n * groups);
  for (int64_t i = 0; i < n * groups; ++i) {
    s2[i] = static_cast<uint8_t>(1 + i % 16);
    z[i] = static_cast<uint8_t>(i % 15);
  }
  const auto l2 = quant::repack_level2_mma(s2.data(), z.data(), n, groups);
  ASSERT_EQ(l2.size(), static_cast<size_t>(2 * groups * 8 * 8));  // 2 blocks x groups x 8 tiles x 8 words
  for (int64_t o = 0; o < 256; ++o)
    for (int64_t g = 0; g < groups; ++g) {
      // block-major: block o / 128, group g, tile (o / 16) % 8, word o % 8
      const size_t at = static_cast<size_t>(((o / 128) * groups + g) * 64 + ((o / 16) % 8) * 8 + o % 8);
      ASSERT_EQ(at, static_cast<size_t>(quant::level2_word_offset(o / 16, g, groups) + o % 8));
      const uint32_t e = l2[at] >> (o % 16 >= 8 ? 16 : 0);
      if (o < n) {
        EXPECT_EQ(e & 0xff, s2[o * groups + g]);
        EXPECT_EQ((e >> 8) & 0xff, static_cast<uint32_t>(s2[o * groups + g] * z[o * groups + g]));  // z s2
      } else {
        EXPECT_EQ(e & 0xffff, 1u);  // padding: s2 = 1, z s2 = 0
      }
    }
}

// The CUDA kernels' level-2 dequantization (one multiply-add and one XOR per
// 4 weights, the constant from the stored z s2) gives exactly the INT8
// weights for every s2 / zero and every combination of four codes whose
// weights lie in [-128, 127] (what the protective range guarantees), byte for
// byte, the same as QServe's multiply + __vadd4 of the scaled zero.
TEST(W4A8Repack, Level2OffsetBinaryIsExact) {
  int64_t checked = 0;
  for (int s2 = 1; s2 <= 16; ++s2)
    for (int z = 0; z <= 15; ++z) {
      std::vector<int> codes;  // the codes whose weight fits in int8
      for (int w4 = 0; w4 <= 15; ++w4)
        if ((w4 - z) * s2 >= -128 && (w4 - z) * s2 <= 127) codes.push_back(w4);
      const uint8_t szero = quant::scaled_zero(static_cast<uint8_t>(s2), static_cast<uint8_t>(z));
      const uint32_t c = quant::level2_offset_constant(static_cast<uint32_t>(s2 * z));
      for (int a : codes)
        for (int b : codes)
          for (int d : codes)
            for (int e : codes) {
              const uint32_t w4x4 = static_cast<uint32_t>(a | b << 8 | d << 16 | e << 24);
              const uint32_t got = quant::level2_dequant_offset4(w4x4, static_cast<uint32_t>(s2), c);
              ASSERT_EQ(got, quant::level2_dequant_wrap4(w4x4, static_cast<uint8_t>(s2), szero))
                  << "s2 " << s2 << " z " << z;
              const int want[4] = {a, b, d, e};
              for (int i = 0; i < 4; ++i)
                ASSERT_EQ(static_cast<int8_t>(got >> (8 * i)), (want[i] - z) * s2) << "s2 " << s2 << " z " << z;
              ++checked;
            }
    }
  EXPECT_GT(checked, 1000000);
}

}  // namespace
}  // namespace qserve
