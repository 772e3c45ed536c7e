// Fused memory-bound kernels against the CPU reference: INT8 codes within one
// step (the row's f32 reductions run in another order), scales and sums to
// fp16 rounding, residual stream bit-exact, embedding rows exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "backend/cpu/fused_ops.h"
#include "backend/cuda/launch_pdl.h"
#include "backend/cuda/kernels/fused_ops.h"
#include "cuda_test_util.h"

namespace qserve::test {
namespace {

struct Int8Host {
  std::vector<int8_t> q;
  std::vector<uint16_t> scale, sum;
  Int8Host(int rows, int cols) : q(static_cast<size_t>(rows) * cols), scale(rows), sum(rows) {}
  Int8Rows rows() { return {q.data(), scale.data(), sum.data()}; }
};
struct Int8Device {
  DeviceBuffer<int8_t> q;
  DeviceBuffer<uint16_t> scale, sum;
  Int8Device(int rows, int cols) : q(static_cast<size_t>(rows) * cols), scale(rows), sum(rows) {}
  Int8Rows rows() { return {q.get(), scale.get(), sum.get()}; }
};

// Plain INT8 quantization of fp16 rows on the GPU against the CPU: codes,
// scales and sums bit for bit.
void expect_quantize_int8_exact(const std::vector<uint16_t>& x, int rows, int cols) {
  Int8Host want(rows, cols);
  quantize_int8_cpu(x.data(), rows, cols, want.rows());
  DeviceBuffer<uint16_t> dx(x);
  Int8Device got(rows, cols);
  QS_CUDA_OK(cuda::quantize_int8(dx.get(), rows, cols, got.rows(), nullptr));
  QS_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(got.q.download(), want.q);
  EXPECT_EQ(got.scale.download(), want.scale);
  EXPECT_EQ(got.sum.download(), want.sum);
}

// Returns the number of codes that differ by one (none may differ by more).
int64_t expect_int8_close(Int8Device& got, const Int8Host& want, int rows, int cols) {
  const auto q = got.q.download();
  const auto s = got.scale.download(), sum = got.sum.download();
  int64_t off_by_one = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    if (std::abs(q[i] - want.q[i]) > 1) {
      ADD_FAILURE() << "element " << i << ": code " << int{q[i]} << ", want " << int{want.q[i]};
      return off_by_one;
    }
    off_by_one += q[i] != want.q[i];
  }
  EXPECT_LE(off_by_one, static_cast<int64_t>(q.size()) / 100 + 2) << "codes differing by one";
  for (int r = 0; r < rows; ++r) {
    const float ws = half_to_float(want.scale[r]);
    EXPECT_NEAR(half_to_float(s[r]), ws, ws * 2e-3f) << "scale of row " << r;
    // sum = s * sum(q): off-by-one codes move it by at most s each
    EXPECT_NEAR(half_to_float(sum[r]), half_to_float(want.sum[r]), ws * (off_by_one + 2) + 2e-3f * std::fabs(half_to_float(want.sum[r])));
  }
  (void)cols;
  return off_by_one;
}

TEST(FusedOpsCuda, RmsNormQuantWithResidual) {
  QS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(1);
  for (int cols : {8, 1000, 4096, 5120, 14336}) {
    for (int rows : {1, 3, 17}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
      const auto x = random_half(rng, static_cast<size_t>(rows) * cols), res = random_half(rng, x.size());
      const auto gamma = random_half(rng, cols, 0.5f, 1.f);
      auto res_cpu = res;
      Int8Host want(rows, cols);
      rmsnorm_quant_cpu(x.data(), res_cpu.data(), gamma.data(), rows, cols, 1e-5f, want.rows());
      DeviceBuffer<uint16_t> dx(x), dres(res), dg(gamma);
      Int8Device got(rows, cols);
      QS_CUDA_OK(cuda::rmsnorm_quant(dx.get(), dres.get(), dg.get(), rows, cols, 1e-5f, got.rows(), nullptr));
      QS_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(dres.download(), res_cpu) << "residual stream";
      expect_int8_close(got, want, rows, cols);
      // fp16 output variant, no residual
      std::vector<uint16_t> y_cpu(x.size());
      rmsnorm_cpu(x.data(), nullptr, gamma.data(), rows, cols, 1e-5f, y_cpu.data());
      DeviceBuffer<uint16_t> dy(x.size());
      QS_CUDA_OK(cuda::rmsnorm(dx.get(), nullptr, dg.get(), rows, cols, 1e-5f, dy.get(), nullptr));
      QS_CUDA_OK(cudaDeviceSynchronize());
      const Fp16Diff d = compare_half(dy.download(), y_cpu, 1e-3, 2e-3);
      EXPECT_EQ(d.bad + d.nan, 0) << "max abs " << d.max_abs;
    }
  }
}

TEST(FusedOpsCuda, SiluMulQuantAndQuantize) {
  QS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(2);
  // SiLU rows use __expf and __fdividef: a code may move by one where y / s
  // lands within a few ulp of a rounding tie (the codes of a given y are exact).
  // Counted over all cases and bounded at 1 in 1,000 codes (+2).
  int64_t silu_off = 0, silu_codes = 0;
  // 8200, 11008, 14336: the shared-memory SiLU kernel for wide rows (odd chunk
  // count too); 28672: past its shared-memory cap, the register kernel again.
  // Up to 64 rows of >= 2048 columns: the clustered kernel (8 blocks a row;
  // 2056: a last block with fewer chunks), 65 rows: the others.
  for (int cols : {16, 2048, 2056, 4096, 8200, 11008, 14336, 28672}) {
    for (int rows : {1, 3, 17, 33, 64, 65}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
      const auto gu = random_half(rng, static_cast<size_t>(rows) * 2 * cols, 2.f);
      Int8Host want(rows, cols);
      silu_mul_quant_cpu(gu.data(), gu.data() + cols, 2 * cols, rows, cols, want.rows());
      DeviceBuffer<uint16_t> dgu(gu);
      Int8Device got(rows, cols);
      QS_CUDA_OK(cuda::silu_mul_quant(dgu.get(), dgu.get() + cols, 2 * cols, rows, cols, got.rows(), nullptr));
      QS_CUDA_OK(cudaDeviceSynchronize());
      silu_off += expect_int8_close(got, want, rows, cols);
      silu_codes += static_cast<int64_t>(rows) * cols;

      // plain quantization sees identical inputs: exact
      expect_quantize_int8_exact(random_half(rng, static_cast<size_t>(rows) * cols, 3.f), rows, cols);
    }
  }
  std::printf("[     INFO ] silu*mul+quant: %lld of %lld codes differ from the CPU by one\n",
              static_cast<long long>(silu_off), static_cast<long long>(silu_codes));
  EXPECT_LE(silu_off, silu_codes / 1000 + 2) << "SiLU codes off by one";
}

// Plain quantization is bit-exact with the CPU (codes without a division per
// element, ties recomputed exactly): rows built to hit the edges. Widths from
// one chunk to past the one-warp-per-row kernel (4096 columns) into the block
// kernel, odd row counts (the warp kernel serves 2 rows per block).
TEST(FusedOpsCuda, QuantizeEdgeRowsBitExact) {
  QS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(4);
  for (int cols : {8, 24, 264, 1000, 2056, 4096, 4104, 6144}) {
    const int rows = 9;
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    std::vector<uint16_t> x(static_cast<size_t>(rows) * cols);
    std::uniform_int_distribution<int> pick(-254, 254);
    for (int r = 0; r < rows; ++r) {
      uint16_t* row = x.data() + static_cast<size_t>(r) * cols;
      for (int i = 0; i < cols; ++i) {
        float v = 0.f;
        switch (r) {
          case 0: v = std::normal_distribution<float>(0.f, 3.f)(rng); break;
          case 1: v = 0.f; break;                                    // zero row: scale 0
          case 2: v = std::normal_distribution<float>(0.f, 2e-5f)(rng); break;  // subnormal fp16 scale
          case 3: v = 0.5f * pick(rng); break;                       // scale 1: every odd code a tie
          case 4: v = 0.125f * pick(rng); break;                     // scale 0.25 after the max below
          case 5: v = std::normal_distribution<float>(0.f, 2e4f)(rng); break;  // large values
          case 6: v = -std::fabs(std::normal_distribution<float>(0.f, 1.f)(rng)); break;  // one sign
          default: v = std::normal_distribution<float>(0.f, 1.f)(rng) * (i % 7 == 0 ? 50.f : 1.f);
        }
        row[i] = float_to_half(std::fmax(-65504.f, std::fmin(65504.f, v)));
      }
      if (r == 3) row[cols / 2] = float_to_half(127.f);   // amax 127: s = 1
      if (r == 4) row[cols - 1] = float_to_half(-31.75f); // amax 31.75: s = 0.25
    }
    {  // the rows hit the edges they were built for
      Int8Host want(rows, cols);
      quantize_int8_cpu(x.data(), rows, cols, want.rows());
      ASSERT_EQ(half_to_float(want.scale[3]), 1.f);
      ASSERT_EQ(half_to_float(want.scale[4]), 0.25f);
    }
    expect_quantize_int8_exact(x, rows, cols);
  }
}

// Programmatic dependent launch (launch_pdl.h): each kernel of a chain
// on one stream reads what the previous one wrote (and rewrites the residual
// the previous one read), with no synchronization in between; the results are
// those of the CPU chain, and identical with plain launches.
TEST(FusedOpsCuda, ProgrammaticLaunchChain) {
  QS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(5);
  // 5 rows: launches that let their dependents launch before their own wait
  // (kTriggerFirstMaxRows), so up to four grids are in flight; 2049: the wait first.
  for (const int rows : {5, 2049}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    const int cols = 4096;
    const auto x = random_half(rng, static_cast<size_t>(rows) * cols), res = random_half(rng, x.size());
    const auto gamma = random_half(rng, cols, 0.5f, 1.f);
    // CPU: y = rmsnorm(x) (fp16), q1 = quant(y); residual chain twice: q2
    std::vector<uint16_t> y(x.size());
    rmsnorm_cpu(x.data(), nullptr, gamma.data(), rows, cols, 1e-5f, y.data());
    auto res_cpu = res;
    Int8Host q2_cpu(rows, cols);
    rmsnorm_quant_cpu(x.data(), res_cpu.data(), gamma.data(), rows, cols, 1e-5f, q2_cpu.rows());
    rmsnorm_quant_cpu(x.data(), res_cpu.data(), gamma.data(), rows, cols, 1e-5f, q2_cpu.rows());
    cudaStream_t stream;
    QS_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<int8_t> q1_first;
    for (bool pdl : {true, false}) {
      SCOPED_TRACE(pdl ? "programmatic launches" : "plain launches");
      cuda::set_programmatic_launch(pdl);
      DeviceBuffer<uint16_t> dx(x), dres(res), dg(gamma), dy(x.size());
      Int8Device q1(rows, cols), q2(rows, cols);
      QS_CUDA_OK(cudaDeviceSynchronize());  // the buffers' uploads and poison ran on the legacy stream
      QS_CUDA_OK(cuda::rmsnorm(dx.get(), nullptr, dg.get(), rows, cols, 1e-5f, dy.get(), stream));
      QS_CUDA_OK(cuda::quantize_int8(dy.get(), rows, cols, q1.rows(), stream));
      QS_CUDA_OK(cuda::rmsnorm_quant(dx.get(), dres.get(), dg.get(), rows, cols, 1e-5f, q2.rows(), stream));
      QS_CUDA_OK(cuda::rmsnorm_quant(dx.get(), dres.get(), dg.get(), rows, cols, 1e-5f, q2.rows(), stream));
      QS_CUDA_OK(cudaStreamSynchronize(stream));
      const auto y_gpu = dy.download();
      EXPECT_EQ(compare_half(y_gpu, y, 1e-3, 2e-3).bad, 0);
      Int8Host q1_want(rows, cols);  // the CPU quantization of what the GPU norm wrote: exact
      quantize_int8_cpu(y_gpu.data(), rows, cols, q1_want.rows());
      const auto q1_got = q1.q.download();
      EXPECT_EQ(q1_got, q1_want.q);
      EXPECT_EQ(q1.scale.download(), q1_want.scale);
      EXPECT_EQ(q1.sum.download(), q1_want.sum);
      EXPECT_EQ(dres.download(), res_cpu) << "residual stream after two norms";
      expect_int8_close(q2, q2_cpu, rows, cols);
      if (pdl) q1_first = q1_got;
      else EXPECT_EQ(q1_got, q1_first) << "plain and programmatic launches differ";
    }
    cuda::set_programmatic_launch(true);
    cudaStreamDestroy(stream);
  }
}

TEST(FusedOpsCuda, EmbeddingGather) {
  QS_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(3);
  const int vocab = 1000, cols = 4096;
  const auto table = random_half(rng, static_cast<size_t>(vocab) * cols);
  std::vector<int32_t> ids{0, 999, 5, 5, 123, 77, 998};
  std::vector<uint16_t> want(ids.size() * cols);
  embedding_gather_cpu(table.data(), vocab, ids.data(), static_cast<int>(ids.size()), cols, want.data());
  DeviceBuffer<uint16_t> dt(table), dout(want.size());
  DeviceBuffer<int32_t> did(ids);
  QS_CUDA_OK(cuda::embedding_gather(dt.get(), vocab, did.get(), static_cast<int>(ids.size()), cols, dout.get(), nullptr));
  QS_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(dout.download(), want);
}

}  // namespace
}  // namespace qserve::test
