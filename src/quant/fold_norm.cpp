#include "quant/fold_norm.h"

#include <algorithm>

#include "core/error.h"

namespace qserve::quant {

void scale_columns(Matrix& w, const std::vector<float>& scale) {
  QS_CHECK(static_cast<int64_t>(scale.size()) == w.cols) << "scale " << scale.size() << " vs cols " << w.cols;
  for (int64_t r = 0; r < w.rows; ++r) {
    float* row = w.row(r);
    for (int64_t c = 0; c < w.cols; ++c) row[c] *= scale[c];
  }
}

void scale_rows(Matrix& w, const std::vector<float>& scale) {
  QS_CHECK(static_cast<int64_t>(scale.size()) == w.rows) << "scale " << scale.size() << " vs rows " << w.rows;
  for (int64_t r = 0; r < w.rows; ++r) {
    float* row = w.row(r);
    for (int64_t c = 0; c < w.cols; ++c) row[c] *= scale[r];
  }
}

void fold_block_norms(BlockWeights& w) {
  for (Matrix* m : {&w.q, &w.k, &w.v}) scale_columns(*m, w.attn_norm);
  for (Matrix* m : {&w.gate, &w.up}) scale_columns(*m, w.mlp_norm);
  std::fill(w.attn_norm.begin(), w.attn_norm.end(), 1.0f);
  std::fill(w.mlp_norm.begin(), w.mlp_norm.end(), 1.0f);
}

void fold_final_norm(OuterWeights& w) {
  scale_columns(w.lm_head, w.final_norm);
  std::fill(w.final_norm.begin(), w.final_norm.end(), 1.0f);
}

}  // namespace qserve::quant
