// Quantized activation and weight formats of W4A8 (docs/qoq-spec sections 2-4b,
// written down for this project in docs/quantized-checkpoint.md):
//  - activations: per-token symmetric INT8 (+ a_sum for per-channel W4 layers);
//  - W4 g128: level 1 per-channel symmetric INT8 with the protective range 119,
//    level 2 per-group asymmetric UINT4 with an integer scale s2 (1..16) and zero;
//  - W4 per-channel: asymmetric UINT4 per output channel;
//  - W8 per-channel (W8A8 baseline) and W4 g128 weight-only (W4A16 baseline).
// All weights are kept in the canonical storage below; backends repack at load.
//
// k that is not a multiple of the group size: the last group of each row is
// partial (k - 128 * (groups - 1) channels) and has its own s2 / zero.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qserve::quant {

inline constexpr int kGroupSize = 128;
inline constexpr int kProtectiveRange = 119;

inline int64_t num_groups(int64_t k, int64_t group) { return (k + group - 1) / group; }

// ---- activations (section 2) ----

struct QuantizedActivations {
  int64_t m = 0, k = 0;
  std::vector<int8_t> q;        // [m, k] row-major, in [-127, 127]
  std::vector<uint16_t> scale;  // [m] fp16 bits: max_i |x| / 127
  std::vector<uint16_t> a_sum;  // [m] fp16 bits: scale * sum_i q
};

// One token: x [k] -> q [k], scale, a_sum (a_sum may be null).
// Returns the row's code sum sum_i q[i] (exact).
int32_t quantize_activation_row(const float* x, int64_t k, int8_t* q, uint16_t* scale, uint16_t* a_sum);
// x [m, k] fp32 row-major.
QuantizedActivations quantize_activations(std::span<const float> x, int64_t m, int64_t k);

// ---- weight storage (section 4b) ----

// INT4 packing: byte j of a row holds channel 2j in the low nibble, 2j+1 in the high.
// vals [n, k] values 0..15 -> packed [n, k/2]; k must be even.
std::vector<uint8_t> pack_int4(std::span<const uint8_t> vals, int64_t n, int64_t k);
std::vector<uint8_t> unpack_int4(std::span<const uint8_t> packed, int64_t n, int64_t k);
inline uint8_t int4_at(const uint8_t* packed, int64_t k, int64_t o, int64_t i) {
  const uint8_t b = packed[o * (k / 2) + i / 2];
  return (i & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0x0f);
}

struct W4G128Weights {
  int64_t n = 0, k = 0, group = kGroupSize;
  std::vector<uint8_t> qweight;  // [n, k/2] packed UINT4 (W4)
  std::vector<uint16_t> s1;      // [n] fp16 bits: level-1 scale
  std::vector<uint8_t> s2;       // [n, groups] level-2 integer scale, 1..16
  std::vector<uint8_t> zero;     // [n, groups] level-2 zero point, 0..15
  int64_t groups() const { return num_groups(k, group); }
};

struct W4PerChannelWeights {
  int64_t n = 0, k = 0;
  std::vector<uint8_t> qweight;   // [n, k/2] packed UINT4
  std::vector<uint16_t> scale;    // [n] fp16 bits
  std::vector<uint8_t> zero;      // [n] 0..15
};

struct W8PerChannelWeights {
  int64_t n = 0, k = 0;
  std::vector<int8_t> q;          // [n, k] symmetric INT8 in [-127, 127]
  std::vector<uint16_t> scale;    // [n] fp16 bits: max |w| / 127
};

// Weight-only W4A16 (AWQ-style): w ~= (q - zero) * scale per group.
struct W4A16Weights {
  int64_t n = 0, k = 0, group = kGroupSize;
  std::vector<uint8_t> qweight;   // [n, k/2] packed UINT4
  std::vector<uint16_t> scale;    // [n, groups] fp16 bits
  std::vector<uint8_t> zero;      // [n, groups] 0..15
  int64_t groups() const { return num_groups(k, group); }
};

// ---- quantizers (round half to even everywhere) ----

// w [n, k] fp32 row-major. `protective_range` is 119 by the spec; other values
// exist for the tests that show why.
W4G128Weights quantize_w4_g128(std::span<const float> w, int64_t n, int64_t k, int64_t group = kGroupSize,
                               int protective_range = kProtectiveRange);
W4PerChannelWeights quantize_w4_per_channel(std::span<const float> w, int64_t n, int64_t k);
W8PerChannelWeights quantize_w8_per_channel(std::span<const float> w, int64_t n, int64_t k);
W4A16Weights quantize_w4a16(std::span<const float> w, int64_t n, int64_t k, int64_t group = kGroupSize);

// Level 2 of one group of INT8 values with range [mn, mx].
struct Level2Params {
  uint8_t s2;    // max(1, round((mx - mn) / 15)), at most 16 when |mn|, |mx| <= 119
  uint8_t zero;  // clamp(round(-mn / s2), 0, 15)
};
Level2Params level2_params(int mn, int mx);
uint8_t level2_quantize(int w8, Level2Params p);  // clamp(round(w8 / s2) + zero, 0, 15)

// ---- level-2 dequantization ----

// The exact value (W4 - z) * s2 (an int in [-128, 127] under the protective range).
inline int level2_dequant_exact(uint8_t w4, uint8_t s2, uint8_t zero) {
  return (static_cast<int>(w4) - static_cast<int>(zero)) * static_cast<int>(s2);
}
// The stored "scaled zero": the low 8 bits of -z * s2.
inline uint8_t scaled_zero(uint8_t s2, uint8_t zero) {
  return static_cast<uint8_t>(-static_cast<int>(zero) * static_cast<int>(s2));
}
// __vadd4 on the host: four independent 8-bit lanes, wrap-around.
inline uint32_t vadd4(uint32_t a, uint32_t b) {
  const uint32_t low = (a & 0x7f7f7f7fu) + (b & 0x7f7f7f7fu);
  return low ^ ((a ^ b) & 0x80808080u);
}
// What the GEMM main loop does to 4 weights of one group in one register:
// w4x4 holds four W4 (one per byte); multiply first (each byte <= 240, no carry
// between lanes), then add the scaled zero in 8-bit lanes. Each result byte is
// the INT8 weight (two's complement).
inline uint32_t level2_dequant_wrap4(uint32_t w4x4, uint8_t s2, uint8_t szero) {
  return vadd4(w4x4 * s2, 0x01010101u * szero);
}

// W8hat [n, k] int8: the level-2 dequantized weights (exact formula).
std::vector<int8_t> dequantize_level2(const W4G128Weights& w);
// Dequantized fp32 weights [n, k] of each format (for accuracy checks).
std::vector<float> dequantize(const W4G128Weights& w);
std::vector<float> dequantize(const W4PerChannelWeights& w);
std::vector<float> dequantize(const W4A16Weights& w);

}  // namespace qserve::quant
