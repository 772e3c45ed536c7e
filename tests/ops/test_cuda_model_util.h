// Helpers of the CUDA model-backend tests: fp16-exact random host tensors
// (the CPU and CUDA backends then see the same numbers), poisoning of device
// outputs, and float comparisons with a printed summary.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/tensor.h"

namespace qserve::test {

// Host F32 values drawn from N(mean, sd) and rounded to fp16.
inline Tensor random_f16_exact(std::mt19937& rng, std::vector<int64_t> shape, float sd, float mean = 0.f) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape));
  std::normal_distribution<float> d(mean, sd);
  for (float& v : t.span<float>()) v = round_to_half(d(rng));
  return t;
}

struct FloatDiff {
  double max_abs = 0, rel_l2 = 0, ref_max = 0;
  int64_t bad = 0, nan = 0, first_bad = -1;
};
// "bad": |got - want| > atol + rtol |want| (NaN is bad).
inline FloatDiff compare_floats(const float* got, const float* want, int64_t n, double atol, double rtol) {
  FloatDiff r;
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    r.ref_max = std::max(r.ref_max, std::fabs(w));
    if (!std::isfinite(g)) {
      if (r.nan++ == 0 && r.first_bad < 0) r.first_bad = i;
      continue;
    }
    const double e = std::fabs(g - w);
    r.max_abs = std::max(r.max_abs, e);
    num += e * e;
    den += w * w;
    if (e > atol + rtol * std::fabs(w) && r.bad++ == 0 && r.first_bad < 0) r.first_bad = i;
  }
  r.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return r;
}

inline std::string describe(const FloatDiff& d) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "max_abs %.3g (ref max %.3g), rel_l2 %.3g, bad %lld, nan %lld, first bad %lld", d.max_abs,
                d.ref_max, d.rel_l2, static_cast<long long>(d.bad), static_cast<long long>(d.nan),
                static_cast<long long>(d.first_bad));
  return buf;
}

inline int64_t argmax(const float* v, int64_t n) { return std::max_element(v, v + n) - v; }

}  // namespace qserve::test
