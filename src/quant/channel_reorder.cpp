#include "quant/channel_reorder.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace qserve::quant {

std::vector<int64_t> salience_order(const std::vector<float>& salience) {
  std::vector<int64_t> perm(salience.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return salience[a] > salience[b]; });
  return perm;
}

std::vector<float> permute(const std::vector<float>& v, const std::vector<int64_t>& perm) {
  QS_CHECK(v.size() == perm.size()) << "permutation size";
  std::vector<float> out(v.size());
  for (size_t j = 0; j < perm.size(); ++j) out[j] = v[perm[j]];
  return out;
}

void permute_columns(Matrix& m, const std::vector<int64_t>& perm) {
  QS_CHECK(static_cast<int64_t>(perm.size()) == m.cols) << "permutation size";
  std::vector<float> tmp(m.cols);
  for (int64_t r = 0; r < m.rows; ++r) {
    float* row = m.row(r);
    for (int64_t j = 0; j < m.cols; ++j) tmp[j] = row[perm[j]];
    std::copy(tmp.begin(), tmp.end(), row);
  }
}

void permute_rows(Matrix& m, const std::vector<int64_t>& perm) {
  QS_CHECK(static_cast<int64_t>(perm.size()) == m.rows) << "permutation size";
  std::vector<float> out(m.data.size());
  for (int64_t j = 0; j < m.rows; ++j) std::copy_n(m.row(perm[j]), m.cols, out.data() + j * m.cols);
  m.data = std::move(out);
}

void reorder_mlp_channels(BlockWeights& w, const std::vector<int64_t>& perm) {
  permute_rows(w.gate, perm);
  permute_rows(w.up, perm);
  permute_columns(w.down, perm);
}

}  // namespace qserve::quant
