// Every op of the CUDA model backend against the CPU backend's op (the FP32
// reference) on odd sizes, device outputs poisoned (0xFF bytes: fp16 NaN,
// int8 -1) before each call. fp16 outputs are compared with fp16 tolerances;
// int8 activation codes may move by one where the f32 reduction order moves
// a value across a rounding boundary (at most 1% of them); the quantized
// GEMMs, given the same INT8 inputs, agree to the epilogue's fp16 rounding.
#ifdef QSERVE_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kv_quant_backend.h"
#include "engine/backend_factory.h"
#include "quant/quant_linear.h"
#include "test_cuda_model_util.h"
#ifdef QSERVE_HAVE_CUDA
#include "backend/cuda/cuda_backend_state.h"
#include "core/half.h"
#endif

namespace qserve {
namespace {

#ifndef QSERVE_HAVE_CUDA
TEST(CudaBackendOps, Skipped) { GTEST_SKIP() << "skipped: no CUDA device (built without CUDA)"; }
#else

using test::compare_floats;
using test::describe;
using test::random_f16_exact;

// The host side of every float upload (embedding, lm_head, norms): values
// converted to fp16 bits in chunks across the host's threads, each as the
// scalar conversion gives it (no device needed). 300,001 values: several
// chunks and a ragged last one.
TEST(CudaBackendHost, HalfBitsOfEveryFloatType) {
  std::mt19937 rng(7);
  const int64_t n = 300001;
  std::vector<float> f(n);
  std::vector<uint16_t> raw(n);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = rng();
    std::memcpy(&f[i], &bits, 4);  // every class: normals, subnormals, inf, NaN
    raw[i] = static_cast<uint16_t>(bits);
  }
  const std::vector<uint16_t> from_f32 = cuda::to_half_bits(Tensor(DType::kF32, {n}, f.data()));
  const std::vector<uint16_t> from_bf16 = cuda::to_half_bits(Tensor(DType::kBF16, {n}, raw.data()));
  const std::vector<uint16_t> from_f16 = cuda::to_half_bits(Tensor(DType::kF16, {n}, raw.data()));
  ASSERT_EQ(from_f32.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(from_f32[i], float_to_half(f[i])) << i;
    ASSERT_EQ(from_bf16[i], float_to_half(bf16_to_float(raw[i]))) << i;
    ASSERT_EQ(from_f16[i], raw[i]) << i;
  }
}

class CudaBackendOps : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      GTEST_SKIP() << "skipped: no CUDA device";
    }
    cpu = make_cpu_backend(false);
    gpu = make_backend("cuda");
  }
  // The backend works on its own non-blocking stream: synchronize around the
  // poisoning so that it lands after the backend's zeroing and before its kernels.
  void poison(Tensor& t) {
    if (t.nbytes() == 0) return;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemset(t.data(), 0xFF, t.nbytes()), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  void poison(Activations& a) {
    poison(a.values);
    if (!a.scales.empty()) poison(a.scales);
    if (!a.sums.empty()) poison(a.sums);
  }
  // A download through the backend that wrote the tensor: each backend
  // orders its work on its own stream, and a download waits for that stream only.
  std::vector<float> host(const Tensor& device, Backend* from = nullptr) {
    Tensor h = (from ? from : gpu.get())->download(device);
    return {h.data_as<float>(), h.data_as<float>() + h.numel()};
  }
  void expect_close(const Tensor& device, const Tensor& ref, double atol, double rtol, const std::string& what,
                    Backend* from = nullptr) {
    const std::vector<float> got = host(device, from);
    ASSERT_EQ(static_cast<int64_t>(got.size()), ref.numel()) << what;
    const test::FloatDiff d = compare_floats(got.data(), ref.data_as<float>(), ref.numel(), atol, rtol);
    EXPECT_EQ(d.bad + d.nan, 0) << what << ": " << describe(d);
  }
  // INT8 activations: codes within one of the reference (<= 1% off by one),
  // scales to fp16 rounding, sums within the moved codes' share.
  void expect_int8_close(const Activations& got, const Activations& ref, const std::string& what) {
    const std::vector<float> q = host(got.values), s = host(got.scales);
    const int64_t T = ref.tokens(), K = ref.dim();
    int64_t off_by_one = 0, worse = 0;
    for (int64_t t = 0; t < T; ++t) {
      int64_t moved = 0;
      for (int64_t i = 0; i < K; ++i) {
        const float d = std::fabs(q[t * K + i] - ref.values.data_as<int8_t>()[t * K + i]);
        if (d == 1) ++off_by_one, ++moved;
        else if (d > 1 || !std::isfinite(d)) ++worse;
      }
      const float rs = ref.scales.data_as<float>()[t];
      EXPECT_NEAR(s[t], rs, 1e-3 * rs) << what << " scale of row " << t;
      if (ref.format == ActFormat::kInt8PerTokenCodeSum) {
        // the exact sum of the device's own codes, and of the reference's
        // within the moved codes
        double own = 0, theirs = 0;
        for (int64_t i = 0; i < K; ++i) own += q[t * K + i], theirs += ref.values.data_as<int8_t>()[t * K + i];
        const float gs = host(got.sums)[t];
        EXPECT_EQ(gs, own) << what << " code sum of row " << t;
        EXPECT_EQ(ref.sums.data_as<int32_t>()[t], theirs) << what << " reference code sum of row " << t;
        EXPECT_LE(std::fabs(gs - theirs), moved) << what << " code sum of row " << t;
      } else if (!ref.sums.empty()) {
        const float gs = host(got.sums)[t], want = ref.sums.data_as<float>()[t];
        EXPECT_NEAR(gs, want, 2e-3 * std::fabs(want) + rs * (moved + 1)) << what << " sum of row " << t;
      }
    }
    EXPECT_EQ(worse, 0) << what;
    EXPECT_LE(off_by_one, std::max<int64_t>(1, T * K / 100)) << what;
  }

  std::mt19937 rng{7};
  std::unique_ptr<Backend> cpu, gpu;
};

TEST_F(CudaBackendOps, EmbeddingAndGatherRowsAreExact) {
  const int64_t V = 37, H = 328;
  Tensor table = random_f16_exact(rng, {V, H}, 1.f);
  std::vector<int32_t> ids = {5, 0, 36, 5, 17, 2, 33};
  Tensor ids_t(DType::kI32, {7}, ids.data());
  Tensor ref = cpu->alloc(DType::kF32, {7, H});
  cpu->embedding(table, ids_t, ref);
  Tensor gt = gpu->upload(table), out = gpu->alloc(DType::kF16, {7, H});
  poison(out);
  gpu->embedding(gt, ids_t, out);
  expect_close(out, ref, 0, 0, "embedding");

  std::vector<int32_t> rows = {6, 0, 3};
  Tensor rows_t(DType::kI32, {3}, rows.data());
  Tensor ref_rows = cpu->alloc(DType::kF32, {3, H}), got_rows = gpu->alloc(DType::kF16, {3, H});
  cpu->gather_rows(ref, rows_t, ref_rows);
  poison(got_rows);
  gpu->gather_rows(out, rows_t, got_rows);
  expect_close(got_rows, ref_rows, 0, 0, "gather_rows");
}

TEST_F(CudaBackendOps, AddIsFp16Rounded) {
  Tensor a = random_f16_exact(rng, {7, 200}, 1.f), b = random_f16_exact(rng, {7, 200}, 1.f);
  Tensor ga = gpu->upload(a), gb = gpu->upload(b);
  cpu->add(a, b);
  gpu->add(ga, gb);
  expect_close(ga, a, 0, 1.0 / 2048, "add");
}

TEST_F(CudaBackendOps, RmsNormInEveryFormat) {
  for (int64_t T : {1, 7, 33})
    for (int64_t H : {320, 584})
      for (ActFormat f : {ActFormat::kFloat, ActFormat::kInt8PerToken, ActFormat::kInt8PerTokenSum,
                         ActFormat::kInt8PerTokenCodeSum})
        for (bool residual : {false, true}) {
          const std::string what = fmt::format("T {} H {} {} residual {}", T, H, act_format_name(f), residual);
          Tensor x = random_f16_exact(rng, {T, H}, 1.f), d = random_f16_exact(rng, {T, H}, 0.5f);
          Tensor w = random_f16_exact(rng, {H}, 0.1f, 1.f);
          Tensor gx = gpu->upload(x), gd = gpu->upload(d), gw = gpu->upload(w);
          Activations ref = cpu->alloc_activations(f, T, H), got = gpu->alloc_activations(f, T, H);
          poison(got);
          if (residual) {
            // The updated residual is fp16 on the GPU (fp16(x + d), exact);
            // the reference norms that same rounded stream.
            cpu->add(x, d);
            for (float& v : x.span<float>()) v = round_to_half(v);
            cpu->rms_norm(x, w, 1e-5f, ref);
            gpu->add_rms_norm(gx, gd, gw, 1e-5f, got);
            expect_close(gx, x, 0, 0, what + " (residual)");
          } else {
            cpu->rms_norm(x, w, 1e-5f, ref);
            gpu->rms_norm(gx, gw, 1e-5f, got);
          }
          if (f == ActFormat::kFloat) expect_close(got.values, ref.values, 1e-3, 2e-3, what);
          else expect_int8_close(got, ref, what);
        }
}

TEST_F(CudaBackendOps, SiluMulAndQuantize) {
  for (int64_t T : {1, 7, 33})
    for (ActFormat f : {ActFormat::kFloat, ActFormat::kInt8PerToken, ActFormat::kInt8PerTokenSum,
                         ActFormat::kInt8PerTokenCodeSum}) {
      const int64_t I = 904;
      const std::string what = fmt::format("T {} {}", T, act_format_name(f));
      Tensor g = random_f16_exact(rng, {T, I}, 2.f), u = random_f16_exact(rng, {T, I}, 1.f);
      Tensor gg = gpu->upload(g), gu = gpu->upload(u);
      Activations ref = cpu->alloc_activations(f, T, I), got = gpu->alloc_activations(f, T, I);
      poison(got);
      cpu->silu_mul(g, u, ref);
      gpu->silu_mul(gg, gu, got);
      if (f == ActFormat::kFloat) expect_close(got.values, ref.values, 1e-3, 2e-3, "silu_mul " + what);
      else expect_int8_close(got, ref, "silu_mul " + what);

      Activations qref = cpu->alloc_activations(f, T, I), qgot = gpu->alloc_activations(f, T, I);
      poison(qgot);
      cpu->quantize(g, qref);
      gpu->quantize(gg, qgot);
      if (f == ActFormat::kFloat) expect_close(qgot.values, qref.values, 0, 0, "quantize " + what);
      else expect_int8_close(qgot, qref, "quantize " + what);
    }
}

// silu_mul on one gate|up GEMM output [T, 2I] (rows gate | up): against the
// CPU reference as silu_mul, and bit for bit the device's silu_mul of the
// two halves (the same kernel, reading rows 2I apart).
TEST_F(CudaBackendOps, SiluMulFusedReadsGateAndUpHalves) {
  for (int64_t T : {1, 9, 33})
    for (ActFormat f : {ActFormat::kFloat, ActFormat::kInt8PerToken, ActFormat::kInt8PerTokenSum,
                         ActFormat::kInt8PerTokenCodeSum}) {
      const int64_t I = 904;
      const std::string what = fmt::format("T {} {}", T, act_format_name(f));
      Tensor g = random_f16_exact(rng, {T, I}, 2.f), u = random_f16_exact(rng, {T, I}, 1.f);
      Tensor gate_up = Tensor::zeros(DType::kF32, {T, 2 * I});
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < I; ++i) {
          gate_up.data_as<float>()[t * 2 * I + i] = g.data_as<float>()[t * I + i];
          gate_up.data_as<float>()[t * 2 * I + I + i] = u.data_as<float>()[t * I + i];
        }
      Activations ref = cpu->alloc_activations(f, T, I), got = gpu->alloc_activations(f, T, I),
                  split = gpu->alloc_activations(f, T, I);
      poison(got);
      poison(split);
      cpu->silu_mul(g, u, ref);
      Tensor ggu = gpu->upload(gate_up), gg = gpu->upload(g), gu = gpu->upload(u);
      gpu->silu_mul_fused(ggu, got);
      gpu->silu_mul(gg, gu, split);
      if (f == ActFormat::kFloat) expect_close(got.values, ref.values, 1e-3, 2e-3, "silu_mul_fused " + what);
      else expect_int8_close(got, ref, "silu_mul_fused " + what);
      EXPECT_EQ(host(got.values), host(split.values)) << what;
      if (f != ActFormat::kFloat) {
        EXPECT_EQ(host(got.scales), host(split.scales)) << what;
      }
      if (f == ActFormat::kInt8PerTokenSum || f == ActFormat::kInt8PerTokenCodeSum) {
        EXPECT_EQ(host(got.sums), host(split.sums)) << what;
      }
    }
}

// The same INT8 (or fp16) input on both sides: the CPU oracle quantizes, the
// codes and scales are copied to the device.
Activations to_device(Backend& gpu, const Activations& a) {
  Activations d;
  d.format = a.format;
  d.values = a.format == ActFormat::kFloat ? gpu.upload(a.values) : gpu.upload(a.values);
  if (!a.scales.empty()) d.scales = gpu.upload(a.scales);
  if (!a.sums.empty()) d.sums = gpu.upload(a.sums);
  return d;
}

TEST_F(CudaBackendOps, LinearsOfEveryFormat) {
  struct Shape {
    int64_t n, k;
  };
  for (quant::WeightFormat fmt : {quant::WeightFormat::kF16, quant::WeightFormat::kW4G128, quant::WeightFormat::kW4PerChannel,
                                  quant::WeightFormat::kW8PerChannel, quant::WeightFormat::kW4A16})
    for (Shape s : {Shape{200, 320}, Shape{1000, 576}, Shape{96, 896}})
      // m = 300: W8A8 on the INT8-weight wgmma kernel (sm_90); m = 1030: g128
      // through the dequantization pass (gemm_s8.h, gemm_w4a8_wgmma.cpp).
      for (int64_t m : {1, 7, 33, 300, 1030}) {
        const std::string what = fmt::format("{} n {} k {} m {}", quant::weight_format_name(fmt), s.n, s.k, m);
        Tensor wt = random_f16_exact(rng, {s.n, s.k}, 1.0f / std::sqrt(static_cast<float>(s.k)));
        quant::Matrix mat(s.n, s.k);
        std::copy(wt.data_as<float>(), wt.data_as<float>() + wt.numel(), mat.data.begin());
        const quant::QuantizedLinear ql = quant::quantize_linear(fmt, mat, 128);
        auto lc = cpu->make_quantized_linear(quant::QuantizedLinear(ql));
        auto lg = gpu->make_quantized_linear(quant::QuantizedLinear(ql));
        ASSERT_EQ(lc->input_format(), lg->input_format()) << what;
        Tensor x = random_f16_exact(rng, {m, s.k}, 1.f);
        Activations xc = cpu->alloc_activations(lc->input_format(), m, s.k);
        cpu->quantize(x, xc);
        Activations xg = to_device(*gpu, xc);
        Tensor yc = cpu->alloc(DType::kF32, {m, s.n}), yg = gpu->alloc(DType::kF16, {m, s.n});
        poison(yg);
        lc->forward(xc, yc);
        lg->forward(xg, yg);
        // Integer formats: the same accumulators, one fp16 rounding each side
        // (one ulp apart at most). Float formats: f32 sums in another order
        // and, for W4A16, fp16-rounded dequantized weights on the GPU.
        const bool integer = fmt == quant::WeightFormat::kW4G128 || fmt == quant::WeightFormat::kW4PerChannel ||
                             fmt == quant::WeightFormat::kW8PerChannel;
        if (integer) expect_close(yg, yc, 1e-4, 1.0 / 1024, what);
        else expect_close(yg, yc, 4e-3, 4e-3, what);
      }
  // A float linear with a bias.
  Tensor w = random_f16_exact(rng, {72, 320}, 0.05f), b = random_f16_exact(rng, {72}, 1.f);
  auto lc = cpu->make_linear(w, b);
  auto lg = gpu->make_linear(w, b);
  Tensor x = random_f16_exact(rng, {5, 320}, 1.f);
  Activations xc = cpu->alloc_activations(ActFormat::kFloat, 5, 320);
  xc.values = x;
  Activations xg = to_device(*gpu, xc);
  Tensor yc = cpu->alloc(DType::kF32, {5, 72}), yg = gpu->alloc(DType::kF16, {5, 72});
  poison(yg);
  lc->forward(xc, yc);
  lg->forward(xg, yg);
  expect_close(yg, yc, 4e-3, 4e-3, "fp16 linear + bias");
}

// RoPE + KV write + attention of a step: prefill of 3 sequences of odd
// lengths, then a chunk + decode step, then a decode step, pages scattered;
// CUDA packed pages vs the CPU's FP32 pages (fake-quantized for KV4 / KV8).
// poison_pages: the pool starts as 0xFF bytes (NaN in every format) instead
// of zeros, so that a kernel reading a slot beyond a context shows.
class CudaBackendAttention : public CudaBackendOps, public ::testing::WithParamInterface<bool> {};

TEST_P(CudaBackendAttention, RopeKvWriteAndAttention) {
  const bool poison_pages = GetParam();
  struct AttnCase {
    KvDtype kv;
    int64_t hq, hkv, d;
    double atol, max_rel_l2;
  };
  for (AttnCase c : {AttnCase{KvDtype::kFp16, 6, 2, 64, 5e-3, 3e-3}, AttnCase{KvDtype::kInt8, 8, 2, 128, 2e-2, 1e-2},
                     AttnCase{KvDtype::kInt4, 6, 2, 64, 0.1, 3e-2}, AttnCase{KvDtype::kInt4, 4, 4, 128, 0.1, 3e-2},
                     AttnCase{KvDtype::kFp16, 8, 1, 128, 5e-3, 3e-3}}) {
    std::unique_ptr<Backend> ref = make_cpu_backend(false);
    if (c.kv != KvDtype::kFp16) ref = cpu::make_kv_quant_backend(std::move(ref), c.kv);
    std::unique_ptr<Backend> dev = make_backend("cuda", c.kv);
    const int64_t page = 16, pages = 40;
    KvLayer kc = ref->alloc_kv_layer(pages, page, c.hkv, c.d), kg = dev->alloc_kv_layer(pages, page, c.hkv, c.d);
    if (poison_pages) {  // attention must never read a slot beyond a context
      poison(kg.k);
      poison(kg.v);
    }
    RopeParams rope;
    rope.head_dim = c.d;
    for (int64_t j = 0; j < c.d / 2; ++j) rope.inv_freq.push_back(std::pow(10000.f, -2.f * j / c.d));
    std::vector<int32_t> perm(pages);
    for (int32_t i = 0; i < pages; ++i) perm[i] = (i * 17 + 5) % pages;  // 17 is coprime with 40
    std::vector<std::vector<int32_t>> tables(3);
    std::vector<int32_t> lens(3, 0);
    size_t next = 0;
    // fused: the device reads q, k and v from one q|k|v row ([T, (Hq + 2 Hkv) D],
    // rope_kv_write_fused) and writes the rotated q to a poisoned buffer of its own.
    auto run_step = [&](const std::vector<std::pair<int, int>>& parts, bool fused, const std::string& what) {
      AttentionBatch ab;
      ab.page_size = page;
      ab.token_offsets.push_back(0);
      ab.page_table_offsets.push_back(0);
      for (auto [s, n] : parts) {
        for (int i = 0; i < n; ++i) {
          const int32_t pos = lens[s]++;
          if (pos / page >= static_cast<int64_t>(tables[s].size())) tables[s].push_back(perm[next++]);
          ab.positions.push_back(pos);
          ab.slots.push_back(static_cast<int32_t>(tables[s][pos / page] * page + pos % page));
        }
        ab.token_offsets.push_back(static_cast<int32_t>(ab.positions.size()));
        ab.page_table.insert(ab.page_table.end(), tables[s].begin(), tables[s].end());
        ab.page_table_offsets.push_back(static_cast<int32_t>(ab.page_table.size()));
        ab.context_lens.push_back(lens[s]);
      }
      const int64_t T = ab.num_tokens();
      Tensor q = random_f16_exact(rng, {T, c.hq * c.d}, 1.f), k = random_f16_exact(rng, {T, c.hkv * c.d}, 1.f),
             v = random_f16_exact(rng, {T, c.hkv * c.d}, 1.f);
      Tensor gq = dev->upload(q), gk = dev->upload(k), gv = dev->upload(v);
      Tensor qkv = Tensor::zeros(DType::kF32, {T, (c.hq + 2 * c.hkv) * c.d});
      for (int64_t t = 0; t < T; ++t) {
        float* row = qkv.data_as<float>() + t * qkv.dim(1);
        std::copy_n(q.data_as<float>() + t * c.hq * c.d, c.hq * c.d, row);
        std::copy_n(k.data_as<float>() + t * c.hkv * c.d, c.hkv * c.d, row + c.hq * c.d);
        std::copy_n(v.data_as<float>() + t * c.hkv * c.d, c.hkv * c.d, row + (c.hq + c.hkv) * c.d);
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      ref->begin_step(ab);
      ref->rope_kv_write(q, k, v, rope, ab, kc);
      Tensor oc = ref->alloc(DType::kF32, {T, c.hq * c.d});
      ref->attention(q, kc, ab, scale, oc);
      dev->begin_step(ab);
      if (fused) {
        Tensor gqkv = dev->upload(qkv);
        poison(gq);
        dev->rope_kv_write_fused(gqkv, gq, rope, ab, kg);
      } else {
        dev->rope_kv_write(gq, gk, gv, rope, ab, kg);
      }
      Tensor og = dev->alloc(DType::kF16, {T, c.hq * c.d});
      poison(og);
      dev->attention(gq, kg, ab, scale, og);
      expect_close(gq, q, 2e-3, 2e-3, what + " q after RoPE", dev.get());
      const std::vector<float> got = host(og, dev.get());
      const test::FloatDiff d = compare_floats(got.data(), oc.data_as<float>(), oc.numel(), c.atol, 2e-2);
      EXPECT_EQ(d.bad + d.nan, 0) << what << ": " << describe(d);
      EXPECT_LE(d.rel_l2, c.max_rel_l2) << what << ": " << describe(d);
    };
    const std::string name = fmt::format("kv{} hq {} hkv {} d {}", kv_bits(c.kv), c.hq, c.hkv, c.d);
    run_step({{0, 37}, {1, 1}, {2, 70}}, false, name + " prefill");
    run_step({{2, 1}, {1, 23}, {0, 1}}, true, name + " chunk + decode, fused q|k|v");
    run_step({{0, 1}, {1, 1}, {2, 1}}, false, name + " decode");
    run_step({{0, 1}, {1, 1}, {2, 1}}, true, name + " decode 2, fused q|k|v");
  }
}

INSTANTIATE_TEST_SUITE_P(Pages, CudaBackendAttention, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "poisoned_pool" : "zeroed_pool"; });

TEST_F(CudaBackendOps, ZeroKvPagesTouchesOnlyThosePages) {
  std::vector<KvLayer> layers;
  for (int l = 0; l < 3; ++l) {
    layers.push_back(gpu->alloc_kv_layer(9, 16, 2, 64));
    poison(layers.back().k);
    poison(layers.back().v);
  }
  const std::vector<int32_t> pages = {3, 0, 7};
  gpu->zero_kv_pages(layers, pages);
  for (KvLayer& layer : layers)
    for (Tensor* t : {&layer.k, &layer.v}) {
      const std::vector<float> bytes = host(*t);
      const int64_t page_bytes = t->dim(1);
      for (int64_t p = 0; p < 9; ++p) {
        const bool zeroed = p == 0 || p == 3 || p == 7;
        int64_t wrong = 0;
        for (int64_t i = 0; i < page_bytes; ++i) wrong += bytes[p * page_bytes + i] != (zeroed ? 0.f : 255.f);
        EXPECT_EQ(wrong, 0) << "page " << p;
      }
    }
}

TEST_F(CudaBackendOps, KvPagesArePackedAndMemoryIsReported) {
  // Llama-3-8B geometry: 8 KV heads, d = 128, 64-token pages: KV4 pages are
  // 34,816 bytes per pool (docs/kv-cache-layout.md), K and V together twice that.
  EXPECT_EQ(make_backend("cuda", KvDtype::kInt4)->kv_layer_page_bytes(64, 8, 128), 2 * 34816);
  EXPECT_EQ(make_backend("cuda", KvDtype::kInt8)->kv_layer_page_bytes(64, 8, 128), 2 * 8 * (64 * 128 + 256));
  EXPECT_EQ(make_backend("cuda")->kv_layer_page_bytes(64, 8, 128), 2 * 8 * 64 * 128 * 2);
  const BackendMemoryInfo m = gpu->memory_info();
  EXPECT_GT(m.total_bytes, 0);
  EXPECT_GT(m.free_bytes, 0);
  EXPECT_LE(m.free_bytes, m.total_bytes);
}

#endif  // QSERVE_HAVE_CUDA

}  // namespace
}  // namespace qserve
