// Rotary position embedding: the cos/sin table (built once on the host, read
// by the CPU reference and the CUDA kernels alike, so that both rotate with
// identical numbers) and the rotation of one pair.
//
// Conventions, for head_dim d and frequency index i in [0, d/2):
//   rotate-half (HF Llama, NeoX):  pairs (i, i + d/2)
//   interleaved (GPT-J, Meta's original Llama): pairs (2i, 2i + 1)
// inv_freq[i] = theta^(-2i/d), optionally remapped by llama3 scaling.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "quant/kv_format.h"  // QS_HOST_DEVICE, kv_mul_rn

namespace qserve {

enum class RopeStyle : uint8_t { kRotateHalf = 0, kInterleaved = 1 };

struct RopeConfig {
  float theta = 10000.f;
  RopeStyle style = RopeStyle::kRotateHalf;
  // llama3 scaling ("rope_type": "llama3"); off when factor <= 0.
  float llama3_factor = 0.f;
  float llama3_low_freq_factor = 1.f;
  float llama3_high_freq_factor = 4.f;
  int32_t llama3_original_max_position = 8192;
};

// inv_freq[d/2] after scaling.
std::vector<double> rope_inv_freq(const RopeConfig& config, int head_dim);

// [max_positions, head_dim / 2, 2] f32: {cos, sin} of position * inv_freq[i].
std::vector<float> build_rope_table(const RopeConfig& config, int head_dim, int max_positions);

// Indices (a, b) of the elements of pair i in a head vector.
QS_HOST_DEVICE void rope_pair(RopeStyle style, int head_dim, int i, int& a, int& b) {
  if (style == RopeStyle::kRotateHalf) {
    a = i;
    b = i + head_dim / 2;
  } else {
    a = 2 * i;
    b = 2 * i + 1;
  }
}

// (y0, y1) = (x0 c - x1 s, x1 c + x0 s), with the rounding pinned down
// (one product, then a fused multiply-add) so that host and device agree.
QS_HOST_DEVICE void rope_rotate(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = fmaf(x0, c, -kv_mul_rn(x1, s));
  y1 = fmaf(x1, c, kv_mul_rn(x0, s));
}

}  // namespace qserve
