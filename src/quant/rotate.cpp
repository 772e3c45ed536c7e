#include "quant/rotate.h"

#include <algorithm>

#include "core/error.h"

namespace qserve::quant {
namespace {
bool all_ones(const std::vector<float>& g) {
  return std::all_of(g.begin(), g.end(), [](float v) { return v == 1.0f; });
}
}  // namespace

void rotate_block(const Rotation& q, BlockWeights& w) {
  QS_CHECK(all_ones(w.attn_norm) && all_ones(w.mlp_norm)) << "fold the norm gains before rotating";
  for (Matrix* m : {&w.q, &w.k, &w.v, &w.gate, &w.up}) {
    QS_CHECK(m->cols == q.size()) << "input module cols " << m->cols << " vs rotation " << q.size();
    q.apply_right(m->data.data(), m->rows);
  }
  for (Matrix* m : {&w.o, &w.down}) {
    QS_CHECK(m->rows == q.size()) << "output module rows " << m->rows << " vs rotation " << q.size();
    q.apply_left_transposed(m->data.data(), m->cols);
  }
}

void rotate_embedding(const Rotation& q, Matrix& embed) {
  QS_CHECK(embed.cols == q.size()) << "embedding cols " << embed.cols;
  q.apply_right(embed.data.data(), embed.rows);
}

void rotate_lm_head(const Rotation& q, Matrix& lm_head) {
  QS_CHECK(lm_head.cols == q.size()) << "lm_head cols " << lm_head.cols;
  q.apply_right(lm_head.data.data(), lm_head.rows);
}

}  // namespace qserve::quant
