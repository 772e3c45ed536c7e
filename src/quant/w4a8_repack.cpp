#include "quant/w4a8_repack.h"

#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace qserve::quant {

namespace {

// The four nibbles of the 16 bits x, one in the low half of each byte.
inline uint32_t spread_nibbles(uint32_t x) { return (x & 0xf) | (x & 0xf0) << 4 | (x & 0xf00) << 8 | (x & 0xf000) << 12; }

}  // namespace

void repack_w4_mma_blocks(const uint8_t* qweight, int64_t n, int64_t k, int64_t block_begin, int64_t block_end,
                          uint8_t* out) {
  QS_CHECK(k % kMmaTileK == 0) << "k = " << k << " is not a multiple of " << kMmaTileK;
  QS_CHECK(0 <= block_begin && block_begin <= block_end && block_end <= repacked_blocks(n))
      << "blocks [" << block_begin << ", " << block_end << ") of " << repacked_blocks(n);
  const int64_t kt_count = k / kMmaTileK, row_bytes = k / 2;
  uint8_t* const base = out - block_begin * repacked_block_bytes(k);  // where block 0 would start
  // Word w of a lane's 16 bytes: the nibbles k = 64 kt + 16 w + 4 q .. + 3 (two
  // canonical bytes, low nibble first) of rows g (low nibbles) and g + 8 (high).
  ThreadPool::global().parallel_for(
      (block_end - block_begin) * kMmaBlockTiles, [&](int64_t t0, int64_t t1) {
        for (int64_t t = block_begin * kMmaBlockTiles + t0; t < block_begin * kMmaBlockTiles + t1; ++t)
          for (int64_t kt = 0; kt < kt_count; ++kt)
            for (int lane = 0; lane < 32; ++lane) {
              const int64_t row = t * kMmaTileRows + lane / 4;
              const uint8_t* lo = row < n ? qweight + row * row_bytes : nullptr;
              const uint8_t* hi = row + 8 < n ? qweight + (row + 8) * row_bytes : nullptr;
              uint8_t* dst = base + repacked_offset(t, kt, lane, k);
              for (int w = 0; w < 4; ++w) {
                const int64_t at = (kt * kMmaTileK + 16 * w + 4 * (lane % 4)) / 2;
                const uint32_t x = lo ? lo[at] | lo[at + 1] << 8 : 0, y = hi ? hi[at] | hi[at + 1] << 8 : 0;
                const uint32_t word = spread_nibbles(x) | spread_nibbles(y) << 4;
                std::memcpy(dst + 4 * w, &word, 4);  // little-endian: byte b = k + b
              }
            }
      });
}

std::vector<uint8_t> repack_w4_mma(const uint8_t* qweight, int64_t n, int64_t k) {
  QS_CHECK(k % kMmaTileK == 0) << "k = " << k << " is not a multiple of " << kMmaTileK;
  std::vector<uint8_t> out(repacked_blocks(n) * repacked_block_bytes(k));
  repack_w4_mma_blocks(qweight, n, k, 0, repacked_blocks(n), out.data());
  return out;
}

uint8_t repacked_w4_at(const std::vector<uint8_t>& packed, int64_t k, int64_t o, int64_t i) {
  const int64_t t = o / kMmaTileRows, r = o % kMmaTileRows, kt = i / kMmaTileK, ki = i % kMmaTileK;
  const int w = static_cast<int>(ki / 16), q = static_cast<int>(ki % 16) / 4, b = static_cast<int>(ki % 4);
  const int lane = static_cast<int>(r % 8) * 4 + q;
  const uint8_t byte = packed[repacked_offset(t, kt, lane, k) + 4 * w + b];
  return r < 8 ? (byte & 0x0f) : (byte >> 4);
}

std::vector<uint32_t> repack_level2_mma(const uint8_t* s2, const uint8_t* zero, int64_t n, int64_t groups) {
  const int64_t tiles = (n + 127) / 128 * 8;  // 16-channel tiles, padded to whole 128-channel blocks
  std::vector<uint32_t> out(tiles * groups * 8);
  auto entry = [&](int64_t o, int64_t g) -> uint32_t {
    if (o >= n) return 1u;  // s2 = 1, zs2 = 0
    const uint32_t s = s2[o * groups + g], zs2 = s * zero[o * groups + g];
    QS_CHECK(zs2 <= 255) << "level-2 z * s2 = " << zs2 << " outside the protective range";
    return s | zs2 << 8;
  };
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t g = 0; g < groups; ++g)
      for (int r = 0; r < 8; ++r) {
        const int64_t o = t * kMmaTileRows + r;
        out[level2_word_offset(t, g, groups) + r] = entry(o, g) | entry(o + 8, g) << 16;
      }
  return out;
}

}  // namespace qserve::quant
