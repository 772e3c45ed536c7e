#include "backend/cpu/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "core/error.h"

#include "core/half.h"
#include "core/quant_blocks.h"
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

// The best supported path, unless QSERVE_CPU_MATMUL=scalar|avx2|avx512 asks for
// another this CPU has (A/B timings, tests of the narrower paths).
Isa choose_isa() {
  const Isa best = detect_isa();
  const char* e = std::getenv("QSERVE_CPU_MATMUL");
  if (e == nullptr || *e == '\0') return best;
  const std::string want(e);
  const Isa asked = want == "scalar" ? Isa::kScalar : want == "avx2" ? Isa::kAvx2 : want == "avx512" ? Isa::kAvx512 : best;
  QS_CHECK(want == "scalar" || want == "avx2" || want == "avx512")
      << "QSERVE_CPU_MATMUL=" << want << ": expected scalar, avx2 or avx512";
  QS_CHECK(static_cast<int>(asked) <= static_cast<int>(best))
      << "QSERVE_CPU_MATMUL=" << want << ": this CPU's best is " << (best == Isa::kAvx512 ? "avx512" : best == Isa::kAvx2 ? "avx2" : "scalar");
  return asked;
}

Isa isa() {
  static const Isa cached = choose_isa();
  return cached;
}

float widen(float w) { return w; }
struct F16Bits {
  uint16_t bits;
};
struct BF16Bits {
  uint16_t bits;
};
float widen(F16Bits w) { return half_to_float(w.bits); }
float widen(BF16Bits w) { return bf16_to_float(w.bits); }

// Columns [n0, n1) of y, plain loops.
template <typename W>
void matmul_scalar_cols(const float* x, const W* w, const float* bias, float* y, int64_t T, int64_t K, int64_t N, int64_t n0,
                        int64_t n1) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * K;
    for (int64_t n = n0; n < n1; ++n) {
      const W* wn = w + n * K;
      float acc = 0.0f;
      for (int64_t i = 0; i < K; ++i) acc += xt[i] * widen(wn[i]);
      y[t * N + n] = bias ? acc + bias[n] : acc;
    }
  }
}

// Columns [n0, n1) of y on weights in a GGUF block format: each row widened
// to f32 (core/quant_blocks.h), then the loops above.
void matmul_scalar_block_cols(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K,
                              int64_t N, int64_t n0, int64_t n1) {
  std::vector<float> row(static_cast<size_t>(K));
  const size_t row_bytes = dtype_row_bytes(wdtype, K);
  for (int64_t n = n0; n < n1; ++n) {
    dequantize_blocks(wdtype, static_cast<const uint8_t*>(w) + n * row_bytes, row.data(), K);
    // column n alone: y's column n of the F32 loops, same sums
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * K;
      float acc = 0.0f;
      for (int64_t i = 0; i < K; ++i) acc += xt[i] * row[i];
      y[t * N + n] = bias ? acc + bias[n] : acc;
    }
  }
}

// The scalar loops on weights of any type matmul_f32_fast takes.
void matmul_scalar_any_cols(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K,
                            int64_t N, int64_t n0, int64_t n1) {
  if (dtype_is_blocked(wdtype)) matmul_scalar_block_cols(x, w, wdtype, bias, y, T, K, N, n0, n1);
  else if (wdtype == DType::kF16) matmul_scalar_cols(x, static_cast<const F16Bits*>(w), bias, y, T, K, N, n0, n1);
  else if (wdtype == DType::kBF16) matmul_scalar_cols(x, static_cast<const BF16Bits*>(w), bias, y, T, K, N, n0, n1);
  else matmul_scalar_cols(x, static_cast<const float*>(w), bias, y, T, K, N, n0, n1);
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
  split_columns(T, K, N, [&](int64_t n0, int64_t n1) { matmul_scalar_cols(x, w, bias, y, T, K, N, n0, n1); });
}

void matmul_f32_ref(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N) {
  check_weight_type(wdtype, K);
  split_columns(T, K, N, [&](int64_t n0, int64_t n1) { matmul_scalar_any_cols(x, w, wdtype, bias, y, T, K, N, n0, n1); });
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
      split_columns(T, K, N, [&](int64_t n0, int64_t n1) { matmul_scalar_any_cols(x, w, wdtype, bias, y, T, K, N, n0, n1); });
      return;
  }
}

void matmul_f32_fast_serial(const float* x, const float* w, const float* bias, float* y, int64_t T, int64_t K, int64_t N) {
  switch (isa()) {
    case Isa::kAvx512: detail::matmul_f32_avx512(x, w, DType::kF32, bias, y, T, K, N, 0, N); return;
    case Isa::kAvx2: detail::matmul_f32_avx2(x, w, DType::kF32, bias, y, T, K, N, 0, N); return;
    case Isa::kScalar: matmul_scalar_cols(x, w, bias, y, T, K, N, 0, N); return;
  }
}

const char* matmul_f32_fast_isa() {
  switch (isa()) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kScalar: return "scalar";
  }
  return "?";
}

}  // namespace qserve
