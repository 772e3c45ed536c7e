#include "backend/cpu/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "core/error.h"

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace qserve {
namespace {

enum class Isa { kScalar, kAvx2, kAvx512 };

Isa detect_isa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_features::f16c()) return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

const char* isa_name(Isa i) { return i == Isa::kAvx512 ? "avx512" : i == Isa::kAvx2 ? "avx2" : "scalar"; }

// The best supported path, unless QSERVE_CPU_MATMUL=scalar|avx2|avx512 asks for
// another this CPU has (A/B timings, tests of the narrower paths).
Isa choose_isa() {
  const Isa best = detect_isa();
  const char* e = std::getenv("QSERVE_CPU_MATMUL");
  if (e == nullptr || *e == '\0') return best;
  const std::string want(e);
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (want != isa_name(i)) continue;
    QS_CHECK(static_cast<int>(i) <= static_cast<int>(best))
        << "QSERVE_CPU_MATMUL=" << want << ": this CPU's best is " << isa_name(best);
    return i;
  }
  fail(ErrorCode::kInvalidArgument, "QSERVE_CPU_MATMUL={}: expected scalar, avx2 or avx512", want);
}

Isa isa() {
  static const Isa cached = choose_isa();
  return cached;
}

// Columns [n0, n1) of y, plain loops; weights stored narrower than F32 (F16,
// BF16, GGUF blocks) widened a row at a time (widen_to_f32: the same floats the
// SIMD loaders give), so every type has the F32 loops' sums.
void matmul_scalar_cols(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K,
                        int64_t N, int64_t n0, int64_t n1) {
  const size_t row_bytes = dtype_row_bytes(wdtype, K);
  std::vector<float> widened(wdtype == DType::kF32 ? 0 : static_cast<size_t>(K));
  for (int64_t n = n0; n < n1; ++n) {
    const auto* row = static_cast<const uint8_t*>(w) + n * row_bytes;
    const float* wn = reinterpret_cast<const float*>(row);
    if (wdtype != DType::kF32) {
      widen_to_f32(wdtype, row, widened.data(), K);
      wn = widened.data();
    }
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * K;
      float acc = 0.0f;
      for (int64_t i = 0; i < K; ++i) acc += xt[i] * wn[i];
      y[t * N + n] = bias ? acc + bias[n] : acc;
    }
  }
}

void check_weight_type(DType wdtype, int64_t K) {
  QS_CHECK(wdtype == DType::kF32 || wdtype == DType::kF16 || wdtype == DType::kBF16 || dtype_is_blocked(wdtype))
      << "matmul weights " << dtype_name(wdtype);
  QS_CHECK(!dtype_is_blocked(wdtype) || K % dtype_block_elems(wdtype) == 0)
      << "matmul: K = " << K << " is not whole " << dtype_name(wdtype) << " blocks";
}

// Work split: columns in blocks of 16 (the SIMD kernels tile by 4 columns);
// at least ~64k multiply-adds per chunk so tiny layers stay on one thread.
template <typename Fn>
void split_columns(int64_t T, int64_t K, int64_t N, Fn&& fn) {
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (N + kBlock - 1) / kBlock;
  const int64_t work_per_block = std::max<int64_t>(1, T * K * kBlock);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / work_per_block);
  ThreadPool::global().parallel_for(
      blocks, [&](int64_t b0, int64_t b1) { fn(b0 * kBlock, std::min(N, b1 * kBlock)); }, grain);
}

}  // namespace

void matmul_f32_ref(const float* x, const float* w, const float* bias, float* y, int64_t T, int64_t K, int64_t N) {
  split_columns(T, K, N, [&](int64_t n0, int64_t n1) { matmul_scalar_cols(x, w, DType::kF32, bias, y, T, K, N, n0, n1); });
}

void matmul_f32_ref(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N) {
  check_weight_type(wdtype, K);
  split_columns(T, K, N, [&](int64_t n0, int64_t n1) { matmul_scalar_cols(x, w, wdtype, bias, y, T, K, N, n0, n1); });
}

void matmul_f32_fast(const float* x, const float* w, const float* bias, float* y, int64_t T, int64_t K, int64_t N) {
  matmul_f32_fast(x, w, DType::kF32, bias, y, T, K, N);
}

void matmul_f32_fast(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N) {
  check_weight_type(wdtype, K);
  switch (isa()) {
    case Isa::kAvx512:
      split_columns(T, K, N, [&](int64_t n0, int64_t n1) { detail::matmul_f32_avx512(x, w, wdtype, bias, y, T, K, N, n0, n1); });
      return;
    case Isa::kAvx2:
      split_columns(T, K, N, [&](int64_t n0, int64_t n1) { detail::matmul_f32_avx2(x, w, wdtype, bias, y, T, K, N, n0, n1); });
      return;
    case Isa::kScalar:
      split_columns(T, K, N, [&](int64_t n0, int64_t n1) { matmul_scalar_cols(x, w, wdtype, bias, y, T, K, N, n0, n1); });
      return;
  }
}

void matmul_f32_fast_serial(const float* x, const float* w, const float* bias, float* y, int64_t T, int64_t K, int64_t N) {
  switch (isa()) {
    case Isa::kAvx512: detail::matmul_f32_avx512(x, w, DType::kF32, bias, y, T, K, N, 0, N); return;
    case Isa::kAvx2: detail::matmul_f32_avx2(x, w, DType::kF32, bias, y, T, K, N, 0, N); return;
    case Isa::kScalar: matmul_scalar_cols(x, w, DType::kF32, bias, y, T, K, N, 0, N); return;
  }
}

const char* matmul_f32_fast_isa() { return isa_name(isa()); }

}  // namespace qserve
