#include "engine/dummy_weights.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace qserve {
namespace {

using quant::WeightFormat;

constexpr float kOutputGain = 0.5f;  // output RMS / input RMS of a layer (inputs are O(1) after RMSNorm)
constexpr float kCodeStd = 4.61f;    // std of a uniform code in 0..15
constexpr float kInt8Std = 73.3f;    // std of a uniform INT8 in [-127, 127]

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// splitmix64: one 64-bit draw per call; one stream per row.
struct Rng {
  uint64_t state;
  Rng(uint64_t seed, int64_t row) : state(mix64(seed ^ mix64(static_cast<uint64_t>(row) + 0x632be59bd9b4e019ull))) {}
  uint64_t next() { return mix64(state += 0x9e3779b97f4a7c15ull); }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
  int below(int n) { return static_cast<int>((next() >> 32) * static_cast<uint64_t>(n) >> 32); }  // [0, n)
  void bytes(uint8_t* out, int64_t count) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
      const uint64_t r = next();
      std::memcpy(out + i, &r, 8);
    }
    if (i < count) {
      const uint64_t r = next();
      std::memcpy(out + i, &r, static_cast<size_t>(count - i));
    }
  }
};

// A positive fp16 scale around `mean` (x 0.75 .. 1.25).
uint16_t random_scale(Rng& rng, float mean) { return float_to_half(mean * (0.75f + 0.5f * rng.uniform())); }

// The rows of a stacked layer: part p holds rows [offset_p, offset_p + n_p),
// each drawn from the stream of (seed_p, its row within the part), so that a
// stacked layer is, row for row, its parts made one by one.
class RowStreams {
 public:
  RowStreams(const std::vector<int64_t>& ns, const std::vector<uint64_t>& seeds) : seeds_(seeds) {
    QS_CHECK(!ns.empty() && ns.size() == seeds.size()) << ns.size() << " parts, " << seeds.size() << " seeds";
    int64_t at = 0;
    for (int64_t n : ns) {
      QS_CHECK(n > 0) << "empty part";
      offsets_.push_back(at);
      at += n;
    }
    rows_ = at;
  }
  int64_t rows() const { return rows_; }
  Rng at(int64_t row) const {
    size_t p = offsets_.size() - 1;
    while (offsets_[p] > row) --p;
    return Rng(seeds_[p], row - offsets_[p]);
  }

 private:
  std::vector<int64_t> offsets_;
  std::vector<uint64_t> seeds_;
  int64_t rows_ = 0;
};

void parallel_rows(int64_t n, const std::function<void(int64_t)>& row) {
  ThreadPool::global().parallel_for(
      n, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) row(o);
      },
      16);
}

// Level-2 parameters with every code 0..15 inside INT8: s2 in 4..15, zero in
// [max(5, ceil(15 - 127 / s2)), min(10, floor(128 / s2))] (never empty for s2 <= 15).
void random_level2(Rng& rng, uint8_t& s2, uint8_t& zero) {
  const int s = 4 + rng.below(12);
  const int lo = std::max(5, 15 - 127 / s);  // 15 - floor(127 / s) = ceil(15 - 127 / s)
  const int hi = std::min(10, 128 / s);
  s2 = static_cast<uint8_t>(s);
  zero = static_cast<uint8_t>(lo + rng.below(hi - lo + 1));
}

}  // namespace

uint64_t dummy_tensor_seed(uint64_t seed, int64_t layer, const char* name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (const char* c = name; *c; ++c) h = (h ^ static_cast<uint8_t>(*c)) * 0x100000001b3ull;
  return mix64(seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(layer + 1)) ^ h;
}

quant::QuantizedLinear random_quantized_linear(WeightFormat format, int64_t n, int64_t k, int64_t group, uint64_t seed) {
  return random_stacked_linear(format, {n}, k, group, {seed});
}

quant::QuantizedLinear random_stacked_linear(WeightFormat format, const std::vector<int64_t>& ns, int64_t k,
                                             int64_t group, const std::vector<uint64_t>& seeds) {
  const RowStreams streams(ns, seeds);
  const int64_t n = streams.rows();
  QS_CHECK(k > 0) << "empty layer " << n << "x" << k;
  quant::QuantizedLinear q;
  q.format = format;
  q.n = n;
  q.k = k;
  q.group = k;
  const float inv_sqrt_k = 1.0f / std::sqrt(static_cast<float>(k));
  switch (format) {
    case WeightFormat::kF16: {
      const float a = kOutputGain * std::sqrt(3.0f) * inv_sqrt_k;  // uniform [-a, a] has std a / sqrt(3)
      q.f16.resize(static_cast<size_t>(n * k));
      parallel_rows(n, [&](int64_t o) {
        Rng rng = streams.at(o);
        uint16_t* row = q.f16.data() + o * k;
        for (int64_t i = 0; i < k; ++i) row[i] = float_to_half(a * (2.0f * rng.uniform() - 1.0f));
      });
      break;
    }
    case WeightFormat::kW8PerChannel: {
      q.w8.n = n;
      q.w8.k = k;
      q.w8.q.resize(static_cast<size_t>(n * k));
      q.w8.scale.resize(n);
      parallel_rows(n, [&](int64_t o) {
        Rng rng = streams.at(o);
        int8_t* row = q.w8.q.data() + o * k;
        rng.bytes(reinterpret_cast<uint8_t*>(row), k);
        for (int64_t i = 0; i < k; ++i)
          if (row[i] == -128) row[i] = -127;  // symmetric INT8
        q.w8.scale[o] = random_scale(rng, kOutputGain * inv_sqrt_k / kInt8Std);
      });
      break;
    }
    case WeightFormat::kW4PerChannel: {
      QS_CHECK(k % 2 == 0) << "k must be even for INT4, got " << k;
      auto& w = q.w4pc;
      w.n = n;
      w.k = k;
      w.qweight.resize(static_cast<size_t>(n * k / 2));
      w.scale.resize(n);
      w.zero.resize(n);
      parallel_rows(n, [&](int64_t o) {
        Rng rng = streams.at(o);
        rng.bytes(w.qweight.data() + o * (k / 2), k / 2);
        w.scale[o] = random_scale(rng, kOutputGain * inv_sqrt_k / kCodeStd);
        w.zero[o] = static_cast<uint8_t>(6 + rng.below(4));
      });
      break;
    }
    case WeightFormat::kW4G128: {
      QS_CHECK(k % 2 == 0 && group > 0 && group % 2 == 0) << "k " << k << ", group " << group;
      auto& w = q.g128;
      q.group = group;
      w.n = n;
      w.k = k;
      w.group = group;
      const int64_t groups = w.groups();
      w.qweight.resize(static_cast<size_t>(n * k / 2));
      w.s1.resize(n);
      w.s2.resize(static_cast<size_t>(n * groups));
      w.zero.resize(static_cast<size_t>(n * groups));
      constexpr float kMeanS2 = 9.5f;
      parallel_rows(n, [&](int64_t o) {
        Rng rng = streams.at(o);
        rng.bytes(w.qweight.data() + o * (k / 2), k / 2);
        w.s1[o] = random_scale(rng, kOutputGain * inv_sqrt_k / (kCodeStd * kMeanS2));
        for (int64_t g = 0; g < groups; ++g) random_level2(rng, w.s2[o * groups + g], w.zero[o * groups + g]);
      });
      break;
    }
    case WeightFormat::kW4A16: {
      QS_CHECK(k % 2 == 0 && group > 0 && group % 2 == 0) << "k " << k << ", group " << group;
      auto& w = q.w4a16;
      q.group = group;
      w.n = n;
      w.k = k;
      w.group = group;
      const int64_t groups = w.groups();
      w.qweight.resize(static_cast<size_t>(n * k / 2));
      w.scale.resize(static_cast<size_t>(n * groups));
      w.zero.resize(static_cast<size_t>(n * groups));
      parallel_rows(n, [&](int64_t o) {
        Rng rng = streams.at(o);
        rng.bytes(w.qweight.data() + o * (k / 2), k / 2);
        for (int64_t g = 0; g < groups; ++g) {
          w.scale[o * groups + g] = random_scale(rng, kOutputGain * inv_sqrt_k / kCodeStd);
          w.zero[o * groups + g] = static_cast<uint8_t>(6 + rng.below(4));
        }
      });
      break;
    }
  }
  return q;
}

Tensor random_f16_tensor(std::vector<int64_t> shape, float center, float spread, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::kF16, shape);
  const int64_t rows = shape.empty() ? 1 : shape[0];
  const int64_t cols = rows > 0 ? t.numel() / rows : 0;
  uint16_t* data = t.data_as<uint16_t>();
  parallel_rows(rows, [&](int64_t r) {
    Rng rng(seed, r);
    for (int64_t i = 0; i < cols; ++i) data[r * cols + i] = float_to_half(center + spread * (2.0f * rng.uniform() - 1.0f));
  });
  return t;
}

}  // namespace qserve
