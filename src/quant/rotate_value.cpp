#include "quant/rotate_value.h"

#include "core/error.h"
#include "quant/hadamard.h"

namespace qserve::quant {

void rotate_value_heads(const LlamaShape& s, BlockWeights& w, uint64_t seed) {
  const int64_t d = s.head_dim;
  QS_CHECK(w.v.rows == s.kv_dim() && w.o.cols == s.q_dim()) << "value rotation: v " << w.v.rows << " rows, o "
                                                            << w.o.cols << " cols";
  const Rotation r(d, seed);
  // v [kv_dim, hidden]: head h is the contiguous row block [d, hidden]; R^T V_h.
  for (int64_t h = 0; h < s.n_kv_heads; ++h) r.apply_left_transposed(w.v.row(h * d), w.v.cols);
  // o [hidden, q_dim] row-major is [hidden * n_heads, d]: each head's slice of each row times R.
  r.apply_right(w.o.data.data(), w.o.rows * s.n_heads);
}

}  // namespace qserve::quant
