#include "backend/cuda/gemm_cublas.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_w8a8_epilogue.h"
#include "core/error.h"

namespace qserve::cuda {

struct CublasLtGemm::Plan {
  bool int8 = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulAlgo_t> candidates;  // the usable heuristic results, in cuBLASLt's order
  int chosen = 0;                                 // the candidate that runs
  TuneInfo info;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

CublasLtGemm::CublasLtGemm(CudaContext& ctx) : ctx_(ctx) {}
CublasLtGemm::~CublasLtGemm() = default;

void CublasLtGemm::run(const Plan& p, const void* x, const void* w, void* y, cudaStream_t stream) {
  const int32_t one_i = 1, zero_i = 0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const void* alpha = p.int8 ? static_cast<const void*>(&one_i) : static_cast<const void*>(&one_f);
  const void* beta = p.int8 ? static_cast<const void*>(&zero_i) : static_cast<const void*>(&zero_f);
  // Column-major: D (n x m) = op(A) (n x k) * B (k x m), A = W stored k x n (transposed), B = X^T stored k x m.
  QS_CUDA_CHECK(cublasLtMatmul(ctx_.cublas_lt(), p.op, alpha, w, p.a, x, p.b, beta, y, p.c, y, p.c, &p.candidates[p.chosen],
                               ctx_.blas_workspace(), ctx_.blas_workspace_bytes(), stream));
}

CublasLtGemm::Plan& CublasLtGemm::plan(bool int8, int64_t m, int64_t n, int64_t k, const void* x, const void* w,
                                       void* y, cudaStream_t stream) {
  auto key = std::make_tuple(int8, m, n, k);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto p = std::make_unique<Plan>();
  p->int8 = int8;
  const cudaDataType_t in_type = int8 ? CUDA_R_8I : CUDA_R_16F;
  const cudaDataType_t out_type = int8 ? CUDA_R_32I : CUDA_R_16F;
  const cudaDataType_t scale_type = int8 ? CUDA_R_32I : CUDA_R_32F;
  const cublasComputeType_t compute = int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
  QS_CUDA_CHECK(cublasLtMatmulDescCreate(&p->op, compute, scale_type));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  QS_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  QS_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  QS_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->a, in_type, k, n, k));
  QS_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->b, in_type, k, m, k));
  QS_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->c, out_type, n, m, n));

  cublasLtMatmulPreference_t pref = nullptr;
  QS_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = ctx_.blas_workspace_bytes();
  QS_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  constexpr int kMaxCandidates = 16;
  cublasLtMatmulHeuristicResult_t results[kMaxCandidates] = {};
  int found = 0;
  QS_CUDA_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx_.cublas_lt(), p->op, p->a, p->b, p->c, p->c, pref,
                                               kMaxCandidates, results, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0)
    fail(ErrorCode::kUnsupported, "cuBLASLt has no {} algorithm for m={} n={} k={}", int8 ? "INT8" : "FP16", m, n, k);

  // Time each candidate: 2 warm-up runs, then the median of 7 runs of 3 calls.
  cudaEvent_t start, stop;
  QS_CUDA_CHECK(cudaEventCreate(&start));
  QS_CUDA_CHECK(cudaEventCreate(&stop));
  float best = 1e30f;
  int best_index = -1;  // into p->candidates
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    p->candidates.push_back(results[i].algo);
    p->chosen = static_cast<int>(p->candidates.size()) - 1;
    run(*p, x, w, y, stream);
    run(*p, x, w, y, stream);
    std::vector<float> times;
    for (int r = 0; r < 7; ++r) {
      QS_CUDA_CHECK(cudaEventRecord(start, stream));
      for (int j = 0; j < 3; ++j) run(*p, x, w, y, stream);
      QS_CUDA_CHECK(cudaEventRecord(stop, stream));
      QS_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      QS_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      times.push_back(ms * 1000.0f / 3);
    }
    std::nth_element(times.begin(), times.begin() + 3, times.end());
    if (times[3] < best) {
      best = times[3];
      best_index = p->chosen;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  QS_CHECK(best_index >= 0) << "no usable cuBLASLt candidate";
  p->chosen = best_index;
  p->info.best_us = best;
  p->info.candidates = found;
  auto& ref = *p;
  plans_.emplace(key, std::move(p));
  return ref;
}

CublasLtGemm::Plan* CublasLtGemm::find_plan(bool int8, int64_t m, int64_t n, int64_t k) const {
  auto it = plans_.find(std::make_tuple(int8, m, n, k));
  return it == plans_.end() ? nullptr : it->second.get();
}

CublasLtGemm::TuneInfo CublasLtGemm::tune_info(bool int8, int64_t m, int64_t n, int64_t k) const {
  const Plan* p = find_plan(int8, m, n, k);
  return p ? p->info : TuneInfo{};
}

int CublasLtGemm::candidate_count(bool int8, int64_t m, int64_t n, int64_t k) const {
  const Plan* p = find_plan(int8, m, n, k);
  return p ? static_cast<int>(p->candidates.size()) : 0;
}

int CublasLtGemm::chosen_candidate(bool int8, int64_t m, int64_t n, int64_t k) const {
  const Plan* p = find_plan(int8, m, n, k);
  return p ? p->chosen : -1;
}

void CublasLtGemm::select_candidate(bool int8, int64_t m, int64_t n, int64_t k, int index) {
  Plan* p = find_plan(int8, m, n, k);
  QS_CHECK(p) << "select_candidate before the shape's first call";
  QS_CHECK(index >= 0 && index < static_cast<int>(p->candidates.size())) << "no candidate " << index;
  p->chosen = index;
}

void CublasLtGemm::gemm_s8(const int8_t* x, const int8_t* w, int32_t* y, int64_t m, int64_t n, int64_t k,
                           cudaStream_t stream) {
  run(plan(true, m, n, k, x, w, y, stream), x, w, y, stream);
}

void CublasLtGemm::gemm_f16(const __half* x, const __half* w, __half* y, int64_t m, int64_t n, int64_t k,
                            cudaStream_t stream) {
  run(plan(false, m, n, k, x, w, y, stream), x, w, y, stream);
}

}  // namespace qserve::cuda

namespace qserve::cuda {

void gemm_w8a8(CublasLtGemm& blas, const int8_t* x, const __half* s_x, const int8_t* w, const float* s_w,
               int32_t* acc, __half* y, int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  blas.gemm_s8(x, w, acc, m, n, k, stream);
  launch_w8a8_epilogue(acc, s_x, s_w, y, m, n, stream);
}

}  // namespace qserve::cuda
