// The CPU backend: the SIMD matmul against the scalar reference, and the
// reference ops against direct formulas on small odd shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul.h"
#include "core/half.h"
#include "core/tensor.h"

namespace qserve {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every K tail (0..16), token and column tails, with and without bias.
TEST(CpuMatmul, FastEqualsReference) {
  SCOPED_TRACE(matmul_f32_fast_isa());
  const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 5},    {3, 17, 9},  {4, 16, 4},   {5, 33, 19},  {7, 72, 24},
                               {2, 576, 37}, {9, 100, 130}, {65, 31, 7}, {70, 129, 66}, {1, 1536, 64}, {13, 15, 1}};
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    const int64_t T = s[0], K = s[1], N = s[2];
    for (bool with_bias : {false, true}) {
      const auto x = random_vector(T * K, seed++);
      const auto w = random_vector(N * K, seed++);
      const auto b = random_vector(N, seed++);
      std::vector<float> ref(T * N, NAN), fast(T * N, NAN);
      matmul_f32_ref(x.data(), w.data(), with_bias ? b.data() : nullptr, ref.data(), T, K, N);
      matmul_f32_fast(x.data(), w.data(), with_bias ? b.data() : nullptr, fast.data(), T, K, N);
      // Direct check of the reference on one element, then fast vs reference everywhere.
      double direct = with_bias ? b[N - 1] : 0.0;
      for (int64_t i = 0; i < K; ++i) direct += static_cast<double>(x[(T - 1) * K + i]) * w[(N - 1) * K + i];
      EXPECT_NEAR(ref[(T - 1) * N + N - 1], direct, 1e-4 * std::sqrt(static_cast<double>(K)));
      for (int64_t i = 0; i < T * N; ++i)
        ASSERT_NEAR(fast[i], ref[i], 2e-5f * std::sqrt(static_cast<float>(K)) * (1.0f + std::fabs(ref[i])))
            << "T " << T << " K " << K << " N " << N << " at " << i;
    }
  }
}

// 16-bit weights widened in registers: bit-identical to the same weights widened beforehand.
TEST(CpuMatmul, SixteenBitWeightsEqualWidenedF32) {
  const int64_t shapes[][3] = {{1, 576, 13}, {5, 37, 9}, {9, 72, 24}, {2, 15, 3}};
  uint32_t seed = 100;
  for (const auto& s : shapes) {
    const int64_t T = s[0], K = s[1], N = s[2];
    const auto x = random_vector(T * K, seed++);
    const auto wf = random_vector(N * K, seed++);
    const auto b = random_vector(N, seed++);
    for (DType dt : {DType::kF16, DType::kBF16}) {
      std::vector<uint16_t> w16(N * K);
      std::vector<float> widened(N * K);
      for (int64_t i = 0; i < N * K; ++i) {
        w16[i] = dt == DType::kF16 ? float_to_half(wf[i]) : float_to_bf16(wf[i]);
        widened[i] = dt == DType::kF16 ? half_to_float(w16[i]) : bf16_to_float(w16[i]);
      }
      std::vector<float> y16(T * N, NAN), y32(T * N, NAN);
      matmul_f32_fast(x.data(), w16.data(), dt, b.data(), y16.data(), T, K, N);
      matmul_f32_fast(x.data(), widened.data(), b.data(), y32.data(), T, K, N);
      for (int64_t i = 0; i < T * N; ++i) ASSERT_EQ(y16[i], y32[i]) << dtype_name(dt) << " T " << T << " K " << K << " at " << i;
    }
  }
}

// A [N, K] tensor of random blocks of `dt`: random code bytes, the fp16
// scale fields (core/quant_blocks.h's layouts) finite values of either sign.
Tensor random_blocks(DType dt, int64_t N, int64_t K, uint32_t seed) {
  Tensor t = Tensor::zeros(dt, {N, K});
  std::mt19937 rng(seed);
  auto* p = t.data_as<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  std::vector<size_t> halves;  // byte offsets of a block's fp16 fields
  switch (dt) {
    case DType::kQ4_1: case DType::kQ5_1: case DType::kQ4_K: halves = {0, 2}; break;
    case DType::kQ6_K: halves = {208}; break;
    default: halves = {0}; break;
  }
  std::normal_distribution<float> scale(0.0f, 0.05f);
  const size_t bb = dtype_block_bytes(dt);
  for (size_t b = 0; b < t.nbytes() / bb; ++b)
    for (size_t off : halves) {
      const uint16_t h = float_to_half(scale(rng));
      std::memcpy(p + b * bb + off, &h, 2);
    }
  return t;
}

// GGUF block weights dequantized in registers: bit-identical to the matmul on
// the same weights widened to F32 first (to_f32), on every SIMD path this CPU
// has and the scalar loops, over token and column tails and every block format.
TEST(CpuMatmul, BlockWeightsGiveTheF32Bits) {
  using Kernel = void (*)(const float*, const void*, DType, const float*, float*, int64_t, int64_t, int64_t, int64_t, int64_t);
  std::vector<std::pair<const char*, Kernel>> kernels;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) kernels.emplace_back("avx512", detail::matmul_f32_avx512);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    kernels.emplace_back("avx2", detail::matmul_f32_avx2);
  if (kernels.empty()) std::printf("no AVX2 or AVX-512 on this CPU: only the scalar loops are checked\n");
  // T, N; T = 4 is one AVX-512 token tile (4 tokens) on the blocks' one-group loaders
  const int64_t shapes[][2] = {{1, 13}, {2, 5}, {3, 37}, {4, 6}, {5, 4}, {9, 7}, {17, 3}};
  uint32_t seed = 500;
  for (DType dt : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    const int64_t B = dtype_block_elems(dt);
    for (const auto& s : shapes) {
      const int64_t T = s[0], N = s[1], K = B * (1 + seed % 3);  // 1-3 blocks a row
      const Tensor w = random_blocks(dt, N, K, seed++);
      const Tensor widened = to_f32(w);
      const auto x = random_vector(T * K, seed++);
      const auto b = random_vector(N, seed++);
      for (const auto& [isa, kernel] : kernels) {
        std::vector<float> yb(T * N, NAN), yf(T * N, NAN);
        kernel(x.data(), w.data(), dt, b.data(), yb.data(), T, K, N, 0, N);
        kernel(x.data(), widened.data(), DType::kF32, b.data(), yf.data(), T, K, N, 0, N);
        for (int64_t i = 0; i < T * N; ++i)
          ASSERT_EQ(yb[i], yf[i]) << dtype_name(dt) << " " << isa << " T " << T << " K " << K << " N " << N << " at " << i;
      }
      // the threaded entry (whichever path it takes here), and the scalar loops
      std::vector<float> yb(T * N, NAN), yf(T * N, NAN), rb(T * N, NAN), rf(T * N, NAN);
      matmul_f32_fast(x.data(), w.data(), dt, nullptr, yb.data(), T, K, N);
      matmul_f32_fast(x.data(), widened.data_as<float>(), nullptr, yf.data(), T, K, N);
      matmul_f32_ref(x.data(), w.data(), dt, nullptr, rb.data(), T, K, N);
      matmul_f32_ref(x.data(), widened.data_as<float>(), nullptr, rf.data(), T, K, N);
      for (int64_t i = 0; i < T * N; ++i) {
        ASSERT_EQ(yb[i], yf[i]) << dtype_name(dt) << " T " << T << " at " << i;
        ASSERT_EQ(rb[i], rf[i]) << dtype_name(dt) << " scalar, T " << T << " at " << i;
      }
    }
  }
}

TEST(CpuOps, RmsNormMatchesFormula) {
  const int64_t T = 3, H = 37;
  const auto x = random_vector(T * H, 7), w = random_vector(H, 8);
  std::vector<float> out(T * H);
  cpu::rms_norm_rows(x.data(), w.data(), 1e-5f, T, H, out.data());
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += x[t * H + i] * x[t * H + i];
    const double inv = 1.0 / std::sqrt(ss / H + 1e-5);
    for (int64_t i = 0; i < H; ++i) EXPECT_NEAR(out[t * H + i], w[i] * x[t * H + i] * inv, 1e-5);
  }
}

TEST(CpuOps, Int8ActivationRowFollowsTheContract) {
  auto backend = make_cpu_backend();
  const int64_t K = 33;
  auto row = random_vector(K, 3, 2.0f);
  row[5] = -7.25f;  // the max |x|
  for (ActFormat f : {ActFormat::kInt8PerToken, ActFormat::kInt8PerTokenSum, ActFormat::kInt8PerTokenCodeSum}) {
    Activations a = backend->alloc_activations(f, 2, K);
    cpu::write_activation_row(row.data(), K, 1, a);
    const float s = a.scales.data_as<float>()[1];
    EXPECT_EQ(s, half_to_float(float_to_half(7.25f / 127.0f)));
    int64_t qsum = 0;
    for (int64_t i = 0; i < K; ++i) {
      const int8_t q = a.values.data_as<int8_t>()[K + i];
      EXPECT_EQ(q, static_cast<int8_t>(std::clamp(std::nearbyint(row[i] / s), -127.0f, 127.0f)));
      qsum += q;
    }
    if (f == ActFormat::kInt8PerTokenSum) {
      EXPECT_FLOAT_EQ(a.sums.data_as<float>()[1], s * qsum);
    }
    if (f == ActFormat::kInt8PerTokenCodeSum) {
      EXPECT_EQ(a.sums.data_as<int32_t>()[1], qsum);
    }
    std::vector<float> back(K);
    cpu::read_activation_row(a, 1, back.data());
    for (int64_t i = 0; i < K; ++i) EXPECT_NEAR(back[i], row[i], s / 2 + 1e-6f);
  }
  std::vector<float> zeros(K, 0.0f);  // max |x| = 0: scale 0, values 0
  Activations a = backend->alloc_activations(ActFormat::kInt8PerToken, 1, K);
  cpu::write_activation_row(zeros.data(), K, 0, a);
  EXPECT_EQ(a.scales.data_as<float>()[0], 0.0f);
}

TEST(CpuOps, RopeStylesRotatePairs) {
  RopeParams rope;
  rope.head_dim = 6;
  rope.inv_freq = {1.0f, 0.1f, 0.01f};
  const int32_t pos[] = {0, 5};
  for (auto style : {RopeParams::Style::kRotateHalf, RopeParams::Style::kInterleaved}) {
    rope.style = style;
    auto x = random_vector(2 * 2 * 6, 11);  // [T=2, heads=2, D=6]
    const auto orig = x;
    cpu::rope(x.data(), 2, 2, rope, pos);
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(x[h * 6 + j], orig[h * 6 + j]);  // position 0: identity
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 3; ++j) {
        const int a = style == RopeParams::Style::kRotateHalf ? j : 2 * j;
        const int b = style == RopeParams::Style::kRotateHalf ? j + 3 : 2 * j + 1;
        const float* o = orig.data() + (2 + h) * 6;
        const float* r = x.data() + (2 + h) * 6;
        const double ang = 5.0 * rope.inv_freq[j];
        EXPECT_NEAR(r[a], o[a] * std::cos(ang) - o[b] * std::sin(ang), 1e-5);
        EXPECT_NEAR(r[b], o[b] * std::cos(ang) + o[a] * std::sin(ang), 1e-5);
      }
  }
}

// Paged attention over scattered pages equals dense causal attention.
TEST(CpuOps, PagedAttentionEqualsDense) {
  const int64_t heads = 6, kv_heads = 2, D = 12, P = 3, num_pages = 16;
  // Two sequences: A has 4 cached + 3 new tokens, B has 0 cached + 5 new.
  const int64_t lens[] = {7, 5}, news[] = {3, 5};
  AttentionBatch batch;
  batch.page_size = P;
  batch.token_offsets = {0, 3, 8};
  batch.context_lens = {7, 5};
  batch.page_table_offsets = {0, 3, 5};
  batch.page_table = {9, 2, 14, 5, 11};  // scattered
  const auto kd = random_vector(12 * kv_heads * D, 21), vd = random_vector(12 * kv_heads * D, 22);  // dense [seq tok, kvh, D]
  std::vector<float> kp(num_pages * kv_heads * P * D, NAN), vp(kp.size(), NAN);
  int64_t dense_base[] = {0, 7};
  for (int s = 0; s < 2; ++s)
    for (int64_t j = 0; j < lens[s]; ++j) {
      const int32_t page = batch.page_table[batch.page_table_offsets[s] + j / P];
      for (int64_t h = 0; h < kv_heads; ++h)
        for (int64_t d = 0; d < D; ++d) {
          kp[((page * kv_heads + h) * P + j % P) * D + d] = kd[((dense_base[s] + j) * kv_heads + h) * D + d];
          vp[((page * kv_heads + h) * P + j % P) * D + d] = vd[((dense_base[s] + j) * kv_heads + h) * D + d];
        }
      if (j >= lens[s] - news[s]) batch.positions.push_back(static_cast<int32_t>(j));
    }
  const auto q = random_vector(8 * heads * D, 23);
  for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    batch.sliding_window = window;
    std::vector<float> out(8 * heads * D, NAN), fast(8 * heads * D, NAN);
    cpu::attention(q.data(), kp.data(), vp.data(), heads, kv_heads, D, batch, 0.3f, out.data());
    cpu::attention_fast(q.data(), kp.data(), vp.data(), heads, kv_heads, D, batch, 0.3f, fast.data());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(fast[i], out[i], 1e-5f) << "fast attention at " << i;
    for (int64_t t = 0; t < 8; ++t) {
      const int s = t < 3 ? 0 : 1;
      const int64_t p = batch.positions[t];
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kvh = h / 3;
        std::vector<double> sc;
        const int64_t lo = window ? std::max<int64_t>(0, p - *window + 1) : 0;
        for (int64_t j = lo; j <= p; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[(t * heads + h) * D + d] * kd[((dense_base[s] + j) * kv_heads + kvh) * D + d];
          sc.push_back(dot * 0.3);
        }
        double mx = *std::max_element(sc.begin(), sc.end()), den = 0;
        for (double& e : sc) den += (e = std::exp(e - mx));
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = lo; j <= p; ++j) o += sc[j - lo] / den * vd[((dense_base[s] + j) * kv_heads + kvh) * D + d];
          ASSERT_NEAR(out[(t * heads + h) * D + d], o, 1e-5) << "t " << t << " h " << h;
        }
      }
    }
  }
}

// Long prefills (several query-row blocks), a decode and a window: fast == reference.
TEST(CpuOps, FastAttentionEqualsReferenceOnLongContexts) {
  const int64_t heads = 8, kv_heads = 2, D = 16, P = 7, num_pages = 64;
  AttentionBatch batch;
  batch.page_size = P;
  // seq 0: 20 cached + 150 new; seq 1: 90 cached + 1 new (decode).
  const int64_t cached[] = {20, 90}, news[] = {150, 1};
  batch.token_offsets = {0, 150, 151};
  batch.page_table_offsets = {0};
  std::mt19937 rng(5);
  std::vector<int32_t> free_pages(num_pages);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  for (int s = 0; s < 2; ++s) {
    const int64_t len = cached[s] + news[s];
    for (int64_t p = 0; p < (len + P - 1) / P; ++p) {
      batch.page_table.push_back(free_pages.back());
      free_pages.pop_back();
    }
    batch.page_table_offsets.push_back(static_cast<int32_t>(batch.page_table.size()));
    batch.context_lens.push_back(static_cast<int32_t>(len));
    for (int64_t p = cached[s]; p < len; ++p) batch.positions.push_back(static_cast<int32_t>(p));
  }
  const auto kp = random_vector(num_pages * kv_heads * P * D, 31), vp = random_vector(kp.size(), 32);
  const auto q = random_vector(151 * heads * D, 33);
  for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{37}}) {
    batch.sliding_window = window;
    std::vector<float> ref(q.size(), NAN), fast(q.size(), NAN);
    cpu::attention(q.data(), kp.data(), vp.data(), heads, kv_heads, D, batch, 0.25f, ref.data());
    cpu::attention_fast(q.data(), kp.data(), vp.data(), heads, kv_heads, D, batch, 0.25f, fast.data());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 2e-5f) << "at " << i << (window ? " (window)" : "");
  }
}

}  // namespace
}  // namespace qserve
