// The orthogonal rotation of QoQ's block-input rotation (spec section 6, step 2):
//   Q = D * (H_{2^k} (x) H_m) / sqrt(n),   n = 2^k * m,
// with H_{2^k} a Sylvester Hadamard matrix, H_m a Paley Hadamard matrix of a
// small order m (12, 20, 28, 36, 44, ...; m = 1 when n is a power of two), (x)
// the Kronecker product and D a diagonal of +-1 signs from a fixed seed.
// Q is orthogonal (Q Q^T = I): H H^T = n I for a Hadamard matrix, and the
// Kronecker product of Hadamard matrices is a Hadamard matrix.
// When no such m divides n (it exists for every hidden size of the Llama,
// Mistral, Qwen and SmolLM families: 576 = 16 * 36, 896 = 32 * 28, 5120 = 256 * 20),
// Q falls back to a dense random orthogonal matrix (Gram-Schmidt of a seeded
// Gaussian matrix). docs/qoq-quantizer.md describes both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qserve::quant {

// A Hadamard matrix of order m built by Paley's constructions (I: m = q + 1 with q
// prime, q = 3 mod 4; II: m = 2 (q + 1) with q prime, q = 1 mod 4), or Sylvester's
// (m a power of two). Row-major [m, m] of +-1; empty if no construction applies.
std::vector<int8_t> hadamard_matrix(int m);

class Rotation {
 public:
  // Builds Q for dimension n. `seed` picks the sign diagonal (and the dense
  // fallback); the same (n, seed) always gives the same Q.
  explicit Rotation(int64_t n, uint64_t seed = 0);

  int64_t size() const { return n_; }
  // "hadamard 16 x paley 36, random signs (seed 0)" or "dense random orthogonal (seed 0)".
  std::string describe() const;

  // x[r, :] <- x[r, :] Q for each of `rows` rows of length n (row-major [rows, n]).
  // Used for W <- W Q (input modules, lm_head) and for the embedding rows.
  void apply_right(float* x, int64_t rows) const;
  // w <- Q^T w for w row-major [n, cols] (output modules: W <- Q^T W).
  void apply_left_transposed(float* w, int64_t cols) const;
  // Q as a dense row-major [n, n] matrix (tests; small n only).
  std::vector<float> dense() const;

 private:
  void apply_row(float* x, float* scratch) const;

  int64_t n_;
  uint64_t seed_;
  int64_t pow2_ = 1;                // 2^k
  int m_ = 1;                       // Paley order (1: none)
  std::vector<float> small_;        // [m, m] H_m as float
  std::vector<float> signs_;        // [n] D
  std::vector<float> dense_;        // [n, n] the fallback Q (empty when structured)
};

}  // namespace qserve::quant
