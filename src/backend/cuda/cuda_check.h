// One check for every CUDA / cuBLAS status: QS_CUDA_CHECK(expr) aborts with
// file:line, the expression and the library's own message when expr fails.
// (Broken invariants: the kernel layer never throws on a device error.)
// QS_CUDA_CHECK_LAUNCH() checks the last kernel launch.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace qserve::cuda::detail {

[[noreturn]] void cuda_failure(const char* file, int line, const char* expr, const char* library, int code,
                               const char* message);

inline void check_status(cudaError_t status, const char* file, int line, const char* expr) {
  if (status != cudaSuccess) cuda_failure(file, line, expr, "CUDA", status, cudaGetErrorString(status));
}
inline void check_status(cublasStatus_t status, const char* file, int line, const char* expr) {
  if (status != CUBLAS_STATUS_SUCCESS)
    cuda_failure(file, line, expr, "cuBLAS", status, cublasGetStatusString(status));
}

}  // namespace qserve::cuda::detail

#define QS_CUDA_CHECK(expr) ::qserve::cuda::detail::check_status((expr), __FILE__, __LINE__, #expr)
#define QS_CUDA_CHECK_LAUNCH() QS_CUDA_CHECK(cudaGetLastError())
