// Random test matrices for the quantizer's unit tests.
#pragma once

#include <cstdint>
#include <random>

#include "quant/llama_weights.h"

namespace qserve::test {

// [r, c] with entries from N(0, stddev^2).
inline quant::Matrix gaussian_matrix(std::mt19937& rng, int64_t r, int64_t c, float stddev = 1.0f) {
  std::normal_distribution<float> g(0.0f, stddev);
  quant::Matrix m(r, c);
  for (auto& v : m.data) v = g(rng);
  return m;
}

}  // namespace qserve::test
