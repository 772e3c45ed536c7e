#include "quant/hadamard.h"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "core/thread_pool.h"

namespace qserve::quant {
namespace {

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

bool is_prime(int q) {
  if (q < 2) return false;
  for (int d = 2; d * d <= q; ++d)
    if (q % d == 0) return false;
  return true;
}

// Legendre symbol (a / q) for an odd prime q: 0, 1 (a quadratic residue) or -1.
int legendre(int a, int q) {
  a = ((a % q) + q) % q;
  if (a == 0) return 0;
  int64_t r = 1, b = a;
  for (int e = (q - 1) / 2; e > 0; e >>= 1) {  // a^((q-1)/2) mod q
    if (e & 1) r = r * b % q;
    b = b * b % q;
  }
  return r == 1 ? 1 : -1;
}

// Core of both Paley constructions: [q+1, q+1], first row/column +-1, Jacobsthal inside.
std::vector<int> paley_core(int q, int first_column_sign) {
  const int m = q + 1;
  std::vector<int> c(static_cast<size_t>(m) * m, 0);
  for (int j = 1; j < m; ++j) {
    c[j] = 1;
    c[static_cast<size_t>(j) * m] = first_column_sign;
  }
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < q; ++j) c[static_cast<size_t>(i + 1) * m + (j + 1)] = legendre(j - i, q);
  return c;
}

}  // namespace

std::vector<int8_t> hadamard_matrix(int m) {
  std::vector<int8_t> h;
  if (m <= 0) return h;
  if (is_pow2(m)) {  // Sylvester: H[i][j] = (-1)^popcount(i & j)
    h.resize(static_cast<size_t>(m) * m);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) h[static_cast<size_t>(i) * m + j] = (__builtin_popcount(i & j) & 1) ? -1 : 1;
    return h;
  }
  if (m % 4 != 0) return h;
  if (int q = m - 1; is_prime(q) && q % 4 == 3) {  // Paley I: H = I + S, S skew
    std::vector<int> s = paley_core(q, -1);
    h.resize(s.size());
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) h[static_cast<size_t>(i) * m + j] = static_cast<int8_t>(s[static_cast<size_t>(i) * m + j] + (i == j));
    return h;
  }
  if (int q = m / 2 - 1; m % 2 == 0 && is_prime(q) && q % 4 == 1) {
    // Paley II: C symmetric conference matrix of order q+1;
    // H = C (x) [[1, 1], [1, -1]] + I (x) [[1, -1], [-1, -1]].
    const int c_order = q + 1;
    std::vector<int> c = paley_core(q, 1);
    static const int a[2][2] = {{1, 1}, {1, -1}};
    static const int b[2][2] = {{1, -1}, {-1, -1}};
    h.resize(static_cast<size_t>(m) * m);
    for (int i = 0; i < c_order; ++i)
      for (int j = 0; j < c_order; ++j)
        for (int x = 0; x < 2; ++x)
          for (int y = 0; y < 2; ++y)
            h[static_cast<size_t>(2 * i + x) * m + (2 * j + y)] =
                static_cast<int8_t>(c[static_cast<size_t>(i) * c_order + j] * a[x][y] + (i == j ? b[x][y] : 0));
    return h;
  }
  return h;
}

Rotation::Rotation(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  QS_CHECK(n > 0) << "rotation of size " << n;
  std::mt19937_64 rng(seed);
  signs_.resize(n);
  for (auto& s : signs_) s = (rng() & 1) ? -1.0f : 1.0f;
  for (int64_t m = 1; m <= n; ++m) {
    if (n % m != 0 || !is_pow2(n / m)) continue;
    if (m > 1 && is_pow2(m)) continue;  // covered by m = 1
    std::vector<int8_t> h = hadamard_matrix(static_cast<int>(m));
    if (h.empty()) continue;
    m_ = static_cast<int>(m);
    pow2_ = n / m;
    small_.assign(h.begin(), h.end());
    return;
  }
  // Dense fallback: Gram-Schmidt (twice, for stability) of a Gaussian matrix; rows orthonormal.
  m_ = 0;
  pow2_ = 0;
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::vector<double> q(static_cast<size_t>(n) * n);
  for (auto& v : q) v = gauss(rng);
  for (int64_t i = 0; i < n; ++i) {
    double* qi = &q[static_cast<size_t>(i) * n];
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t j = 0; j < i; ++j) {
        const double* qj = &q[static_cast<size_t>(j) * n];
        double dot = 0;
        for (int64_t k = 0; k < n; ++k) dot += qi[k] * qj[k];
        for (int64_t k = 0; k < n; ++k) qi[k] -= dot * qj[k];
      }
    double norm = 0;
    for (int64_t k = 0; k < n; ++k) norm += qi[k] * qi[k];
    norm = std::sqrt(norm);
    for (int64_t k = 0; k < n; ++k) qi[k] /= norm;
  }
  dense_.assign(q.begin(), q.end());
}

std::string Rotation::describe() const {
  if (!dense_.empty()) return fmt::format("dense random orthogonal {}x{} (seed {})", n_, n_, seed_);
  if (m_ == 1) return fmt::format("sylvester hadamard {} with random signs (seed {})", n_, seed_);
  return fmt::format("sylvester hadamard {} (x) paley hadamard {} with random signs (seed {})", pow2_, m_, seed_);
}

void Rotation::apply_row(float* x, float* scratch) const {
  const int64_t n = n_;
  if (!dense_.empty()) {  // y = x Q, Q row-major [n, n]
    for (int64_t j = 0; j < n; ++j) scratch[j] = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float xi = x[i];
      const float* qi = &dense_[static_cast<size_t>(i) * n];
      for (int64_t j = 0; j < n; ++j) scratch[j] += xi * qi[j];
    }
    for (int64_t j = 0; j < n; ++j) x[j] = scratch[j];
    return;
  }
  for (int64_t i = 0; i < n; ++i) x[i] *= signs_[i];
  // x viewed as [pow2, m] (index a * m + b): X <- H_{2^k}^T X H_m.
  if (m_ > 1) {
    for (int64_t a = 0; a < pow2_; ++a) {
      float* row = x + a * m_;
      for (int j = 0; j < m_; ++j) {
        float acc = 0;
        for (int b = 0; b < m_; ++b) acc += row[b] * small_[static_cast<size_t>(b) * m_ + j];
        scratch[j] = acc;
      }
      for (int j = 0; j < m_; ++j) row[j] = scratch[j];
    }
  }
  // Fast Walsh-Hadamard transform along a (stride m); Sylvester H is symmetric.
  for (int64_t len = 1; len < pow2_; len <<= 1)
    for (int64_t a0 = 0; a0 < pow2_; a0 += 2 * len)
      for (int64_t a = a0; a < a0 + len; ++a) {
        float* u = x + a * m_;
        float* v = x + (a + len) * m_;
        for (int b = 0; b < m_; ++b) {
          const float s = u[b], d = v[b];
          u[b] = s + d;
          v[b] = s - d;
        }
      }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void Rotation::apply_right(float* x, int64_t rows) const {
  ThreadPool::global().parallel_for(rows, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(n_);
    for (int64_t r = begin; r < end; ++r) apply_row(x + r * n_, scratch.data());
  });
}

void Rotation::apply_left_transposed(float* w, int64_t cols) const {
  // Column c of w is transformed as a row vector: (Q^T w)[:, c] = (w[:, c]^T Q)^T.
  constexpr int64_t kTile = 16;
  const int64_t tiles = (cols + kTile - 1) / kTile;
  ThreadPool::global().parallel_for(tiles, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(static_cast<size_t>(kTile) * n_), scratch(n_);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t c0 = t * kTile, nc = std::min(kTile, cols - c0);
      for (int64_t i = 0; i < n_; ++i)
        for (int64_t c = 0; c < nc; ++c) buf[c * n_ + i] = w[i * cols + c0 + c];
      for (int64_t c = 0; c < nc; ++c) apply_row(buf.data() + c * n_, scratch.data());
      for (int64_t i = 0; i < n_; ++i)
        for (int64_t c = 0; c < nc; ++c) w[i * cols + c0 + c] = buf[c * n_ + i];
    }
  });
}

std::vector<float> Rotation::dense() const {
  std::vector<float> q(static_cast<size_t>(n_) * n_, 0.0f);
  for (int64_t i = 0; i < n_; ++i) q[static_cast<size_t>(i) * n_ + i] = 1.0f;
  apply_right(q.data(), n_);  // I Q = Q
  return q;
}

}  // namespace qserve::quant
