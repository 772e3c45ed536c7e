// Launch of the W4A8 decode kernel for m <= 8 (kernels/gemm_w4a8_gemv.cuh).
#include "backend/cuda/gemm_w4a8_gemv.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_gemv.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda::w4a8::gemv {

void launch_gemv(bool g128, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  if (p.m < 1 || p.m > 8 || p.k % 64 != 0 || p.n < 1 || ctas < 1) QS_CUDA_CHECK(cudaErrorInvalidValue);
  auto* kernel = g128 ? &gemm_w4a8_gemv_kernel<true> : &gemm_w4a8_gemv_kernel<false>;
  launch_maybe_pdl(kernel, dim3(ctas), dim3(kThreads), 0, stream, pdl, p);
}

}  // namespace qserve::cuda::w4a8::gemv
