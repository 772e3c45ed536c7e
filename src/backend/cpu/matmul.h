// FP32 matrix multiply of the linear layers: y[T, N] = x[T, K] w[N, K]^T (+ bias[N]),
// all row-major f32. Two implementations with the same threading (output
// columns split across core/thread_pool.h):
//  - matmul_f32_ref: plain loops, the oracle;
//  - matmul_f32_fast: register-tiled SIMD (AVX-512F or AVX2+FMA, chosen at run
//    time with __builtin_cpu_supports); the scalar loops where neither exists.
// The two differ only by float summation order (tests bound the difference).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace qserve {

void matmul_f32_ref(const float* x, const float* w, const float* bias, float* y, int64_t T, int64_t K, int64_t N);
// The plain loops on weights of any type the fast path takes (below), each
// row widened first: the oracle, and the fast path on CPUs without AVX2.
void matmul_f32_ref(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N);
void matmul_f32_fast(const float* x, const float* w, const float* bias, float* y, int64_t T, int64_t K, int64_t N);
// The same with weights stored as F32, F16, BF16 or a GGUF block format
// (`wdtype`, core/dtype.h; K whole blocks), widened to f32 in registers: the
// result is bit-identical to matmul_f32_fast on the widened weights (to_f32),
// for 1/2 (16-bit) to 1/7 (Q4_0) of the memory traffic (decode is bound by it).
void matmul_f32_fast(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N);

// matmul_f32_fast (F32 weights) in the calling thread only: for use inside a
// parallel_for body (the pool is not reentrant).
void matmul_f32_fast_serial(const float* x, const float* w, const float* bias, float* y, int64_t T, int64_t K, int64_t N);

// The instruction set matmul_f32_fast uses on this CPU: "avx512", "avx2" or "scalar" (the
// best it has, or a narrower one through QSERVE_CPU_MATMUL=scalar|avx2|avx512).
const char* matmul_f32_fast_isa();

namespace detail {
// One SIMD kernel: y[t, n] for t in [0, T), n in [n0, n1) (no threads). Defined
// in matmul_avx2.cpp / matmul_avx512.cpp, compiled for their instruction sets.
void matmul_f32_avx2(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N, int64_t n0,
                     int64_t n1);
void matmul_f32_avx512(const float* x, const void* w, DType wdtype, const float* bias, float* y, int64_t T, int64_t K, int64_t N, int64_t n0,
                       int64_t n1);
}  // namespace detail

}  // namespace qserve
