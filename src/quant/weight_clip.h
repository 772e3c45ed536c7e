// QoQ step 6 (spec section 6): weight clipping. For each output channel and
// group (the whole row for per-channel formats), try clip ratios r and keep the
// one that minimizes that group's share of the layer output error on
// calibration inputs X:
//   err(o, g, r) = sum_t ( sum_{i in g} X[t, i] * (W[o, i] - Q_r(W)[o, i]) )^2
// where Q_r quantizes W with every group clamped to [r * min, r * max]
// (symmetric formats: [-r max|w|, r max|w|]). The chosen clamps are applied
// to W in place; the caller then quantizes W.
// Deviation from the paper: q_proj/k_proj use their own output error too (the
// paper uses the attention block output); docs/qoq-quantizer.md.
#pragma once

#include <vector>

#include "quant/llama_weights.h"
#include "quant/precision.h"

namespace qserve::quant {

struct ClipOptions {
  std::vector<float> ratios = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f, 0.7f};
  int64_t max_rows = 512;  // calibration rows used (evenly spaced)
};

// x: [rows, k] calibration inputs of the layer. Returns the mean chosen ratio.
double clip_weights(WeightFormat format, int64_t group, Matrix& w, const Matrix& x, const ClipOptions& opt = {});

// Clamps every group of w (the whole row for per-channel formats) to [ratio * min, ratio * max]
// (symmetric formats: [-ratio max|w|, ratio max|w|]): one ratio everywhere, no search.
void clip_to_ratio(WeightFormat format, int64_t group, Matrix& w, float ratio);

}  // namespace qserve::quant
