// Library GEMM baselines through cuBLASLt, for the engine's other precisions
// (W8A8, FP16) and for side-by-side benchmarks. Each shape's algorithm is the
// fastest of cuBLASLt's heuristic candidates (up to 16), timed once on the
// caller's buffers at the first call of that shape and cached.
// Y[m, n] = X[m, k] * W[n, k]^T, all row-major (cuBLASLt sees the column-major
// problem Y^T = W X^T, the "TN" form INT8 tensor cores require).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include <cublasLt.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_context.h"

namespace qserve::cuda {

class CublasLtGemm {
 public:
  explicit CublasLtGemm(CudaContext& ctx);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // INT8 x INT8 -> INT32 (exact).
  void gemm_s8(const int8_t* x, const int8_t* w, int32_t* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream);
  // FP16 x FP16 -> FP16, FP32 accumulation.
  void gemm_f16(const __half* x, const __half* w, __half* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

  // What the tuning found for a shape (after its first call): the median time
  // of the chosen algorithm and how many candidates were timed.
  struct TuneInfo {
    float best_us = 0;
    int candidates = 0;
  };
  TuneInfo tune_info(bool int8, int64_t m, int64_t n, int64_t k) const;

  // For benchmarks that time the candidates their own way (cold weights,
  // graphs): after a shape's first call, how many usable heuristic candidates
  // it has, and which one its later calls run (index < candidate_count;
  // chosen_candidate(): the one they run now, the tuning's until selected).
  int candidate_count(bool int8, int64_t m, int64_t n, int64_t k) const;
  int chosen_candidate(bool int8, int64_t m, int64_t n, int64_t k) const;
  void select_candidate(bool int8, int64_t m, int64_t n, int64_t k, int index);

 private:
  struct Plan;
  Plan& plan(bool int8, int64_t m, int64_t n, int64_t k, const void* x, const void* w, void* y, cudaStream_t stream);
  Plan* find_plan(bool int8, int64_t m, int64_t n, int64_t k) const;  // null before the shape's first call
  void run(const Plan& p, const void* x, const void* w, void* y, cudaStream_t stream);

  CudaContext& ctx_;
  std::map<std::tuple<bool, int64_t, int64_t, int64_t>, std::unique_ptr<Plan>> plans_;
};

// W8A8 (per-channel INT8 weights): cuBLASLt INT8 into acc [m, n] int32
// (caller's workspace), then Y = (s_x[t] * s_w[o]) * acc in fp16.
void gemm_w8a8(CublasLtGemm& blas, const int8_t* x, const __half* s_x, const int8_t* w, const float* s_w,
               int32_t* acc, __half* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

}  // namespace qserve::cuda
