// NFC for the NFC normalizer of tokenizer.json (Qwen2 declares it), from the
// generated tables of nfc_tables.cpp (UAX #15).
#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_tables.h"

namespace qserve::unicode {
namespace {

namespace t = unicode_tables;

// Hangul syllables (UAX #15, 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint32_t ccc(uint32_t cp) {
  if (cp < 0x300) return 0;
  const auto* end = t::kCombiningClass + t::kCombiningClass_size;
  const auto* it = std::lower_bound(t::kCombiningClass, end, cp,
                                    [](const t::CombiningClass& c, uint32_t v) { return c.cp < v; });
  return it != end && it->cp == cp ? it->ccc : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0) {
    const auto* end = t::kDecomposition + t::kDecomposition_size;
    const auto* it = std::lower_bound(t::kDecomposition, end, cp,
                                      [](const t::Decomposition& d, uint32_t v) { return d.cp < v; });
    if (it != end && it->cp == cp) {
      decompose(it->first, out);
      if (it->second) decompose(it->second, out);
      return;
    }
  }
  out.push_back(cp);
}

// 0 when the pair has no primary composite.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* end = t::kComposition + t::kComposition_size;
  const auto* it = std::lower_bound(t::kComposition, end, std::make_pair(a, b),
                                    [](const t::Composition& c, const std::pair<uint32_t, uint32_t>& v) {
                                      return c.first != v.first ? c.first < v.first : c.second < v.second;
                                    });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

std::string to_nfc(std::string_view s) {
  // Below U+0300 nothing decomposes or combines: most text stops here.
  bool simple = true;
  for (char c : s) simple = simple && static_cast<uint8_t>(c) < 0xCC;
  if (simple || utf8_valid_prefix(s) != s.size()) return std::string(s);

  std::vector<uint32_t> cps;
  for (size_t pos = 0; pos < s.size();) decompose(decode_utf8(s, pos), cps);
  // Canonical ordering: each run of non-starters sorted (stably) by class.
  for (size_t i = 0; i < cps.size();) {
    if (ccc(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && ccc(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](uint32_t a, uint32_t b) { return ccc(a) < ccc(b); });
    i = j;
  }
  // Canonical composition.
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  long starter = -1;      // index in out of the last starter
  uint32_t last_ccc = 0;  // class of the last char after the starter (0: the starter itself)
  for (uint32_t cp : cps) {
    const uint32_t k = ccc(cp);
    if (starter >= 0 && (last_ccc < k || (last_ccc == 0 && static_cast<size_t>(starter) + 1 == out.size()))) {
      if (const uint32_t c = compose(out[starter], cp)) {
        out[starter] = c;
        continue;
      }
    }
    if (k == 0) {
      starter = static_cast<long>(out.size());
      last_ccc = 0;
    } else {
      last_ccc = k;
    }
    out.push_back(cp);
  }
  std::string r;
  r.reserve(s.size());
  for (uint32_t cp : out) append_utf8(r, cp);
  return r;
}

}  // namespace qserve::unicode
