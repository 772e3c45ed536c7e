// Launch of the W4A8 decode kernel for m <= 8 (kernels/gemm_w4a8_gemv.cuh).
#include "backend/cuda/gemm_w4a8_gemv.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_gemv.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda::w4a8::gemv {

namespace {
template <bool kG128, int NT>
void launch_nt(const Params& p, int ctas, cudaStream_t stream, bool pdl) {
  launch_maybe_pdl(&gemm_w4a8_gemv_kernel<kG128, NT>, dim3(ctas), dim3(kThreads), 0, stream, pdl, p);
}
}  // namespace

void launch_gemv(bool g128, const Params& p, int ctas, cudaStream_t stream, bool pdl) {
  if (p.m < 1 || p.m > 8 || p.k % 64 != 0 || p.n < 1 || ctas < 1) QS_CUDA_CHECK(cudaErrorInvalidValue);
  g128 ? launch_nt<true, 1>(p, ctas, stream, pdl) : launch_nt<false, 1>(p, ctas, stream, pdl);
}

}  // namespace qserve::cuda::w4a8::gemv
