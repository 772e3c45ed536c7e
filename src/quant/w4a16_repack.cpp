#include "quant/w4a16_repack.h"

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace qserve::quant {
namespace {

// Byte offset of lane (g, t)'s word j in the repacked layout.
size_t word_offset(int64_t k, int64_t t16, int64_t kt, int lane, int j) {
  return ((static_cast<size_t>(t16) * (k / 64) + kt) * 32 + lane) * 16 + static_cast<size_t>(j) * 4;
}

// Where (row r of a 16-row tile, physical k-in-tile c) lives: lane, word, nibble.
struct Slot {
  int lane, word, nibble;
};
Slot slot_of(int r, int c) {
  const int t = c / 16, j = (c % 16) / 4, p = c % 4;  // c = 16t + 4j + p
  const int g = r % 8, hi_row = r / 8;                 // row g or g + 8
  // p 0 / 1 -> nibbles (0 | 1 for row g + 8) and (+4); p 2 / 3 -> nibbles 2 / 3 (+4).
  const int nibble = (p < 2 ? 0 : 2) + hi_row + (p & 1) * 4;
  return {g * 4 + t, j, nibble};
}

}  // namespace

std::vector<uint8_t> repack_w4a16(const W4A16Weights& w) {
  if (w.k % 64 != 0) fail(ErrorCode::kUnsupported, "W4A16 repack: k = {} is not a multiple of 64", w.k);
  const int64_t n16 = (w.n + 15) / 16, kt_total = w.k / 64;
  std::vector<uint8_t> out(static_cast<size_t>(n16 * kt_total) * 32 * 16, 0);
  ThreadPool::global().parallel_for(
      n16,
      [&](int64_t b, int64_t e) {
        for (int64_t t16 = b; t16 < e; ++t16)
          for (int r = 0; r < 16; ++r) {
            const int64_t o = t16 * 16 + r;
            if (o >= w.n) continue;
            for (int64_t kt = 0; kt < kt_total; ++kt)
              for (int c = 0; c < 64; ++c) {
                const Slot s = slot_of(r, c);
                const uint8_t q = int4_at(w.qweight.data(), w.k, o, kt * 64 + c);
                uint8_t& byte = out[word_offset(w.k, t16, kt, s.lane, s.word) + s.nibble / 2];
                byte |= static_cast<uint8_t>(q << ((s.nibble & 1) * 4));
              }
          }
      },
      4);
  return out;
}

uint8_t repacked_w4a16_at(const std::vector<uint8_t>& packed, int64_t k, int64_t o, int64_t i) {
  const Slot s = slot_of(static_cast<int>(o % 16), static_cast<int>(i % 64));
  const uint8_t byte = packed[word_offset(k, o / 16, i / 64, s.lane, s.word) + s.nibble / 2];
  return (s.nibble & 1) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0x0f);
}

std::vector<uint32_t> repack_w4a16_params(const W4A16Weights& w) {
  const int64_t n16 = (w.n + 15) / 16, groups = w.groups();
  std::vector<uint32_t> out(static_cast<size_t>(n16 * groups) * 8 * 2, 0);
  auto half2_bits = [](uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16); };
  for (int64_t t16 = 0; t16 < n16; ++t16)
    for (int64_t gr = 0; gr < groups; ++gr)
      for (int g = 0; g < 8; ++g) {
        const int64_t lo = t16 * 16 + g, hi = lo + 8;
        // Rows past n: scale 0 (their outputs are never stored), zero 0.
        const uint16_t s_lo = lo < w.n ? w.scale[lo * groups + gr] : 0, s_hi = hi < w.n ? w.scale[hi * groups + gr] : 0;
        const uint8_t z_lo = lo < w.n ? w.zero[lo * groups + gr] : 0, z_hi = hi < w.n ? w.zero[hi * groups + gr] : 0;
        const size_t at = (static_cast<size_t>(t16 * groups + gr) * 8 + g) * 2;
        out[at] = half2_bits(s_lo, s_hi);
        out[at + 1] = half2_bits(float_to_half(1024.0f + z_lo), float_to_half(1024.0f + z_hi));
      }
  return out;
}

}  // namespace qserve::quant
