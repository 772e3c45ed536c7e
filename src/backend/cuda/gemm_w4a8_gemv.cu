// Launch of the W4A8 decode kernels for m <= 8 / 16 (kernels/gemm_w4a8_gemv.cuh).
#include "backend/cuda/gemm_w4a8_gemv.h"

#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_gemv.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda::w4a8::gemv {

namespace {

template <bool kG128, int kNT, bool kRing>
void launch(const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  constexpr int kCtasPerSm = ctas_per_sm(8 * kNT);  // the kernel's launch bounds, the planner's CTA count
  auto* kernel = &gemm_w4a8_gemv_kernel<kG128, kNT, kRing, kCtasPerSm>;
  constexpr int smem = kRing ? kSmemBytes<kNT> : 0;
  if constexpr (smem > 48 * 1024) {
    static std::once_flag once;  // above the default 48 KB of dynamic shared memory
    std::call_once(once, [&] {
      QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    });
  }
  launch_maybe_pdl(kernel, dim3(ctas), dim3(kThreads), smem, stream, pdl, p);
}

}  // namespace

void launch_gemv(bool g128, int tokens, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  if ((tokens != 8 && tokens != 16) || p.m < 1 || p.m > tokens || p.k % 64 != 0 || p.n < 1 || ctas < 1)
    QS_CUDA_CHECK(cudaErrorInvalidValue);
  if (tokens == 16)
    g128 ? launch<true, 2, true>(p, ctas, stream, pdl) : launch<false, 2, true>(p, ctas, stream, pdl);
  else if (p.m > kMaxDirectTokens)
    g128 ? launch<true, 1, true>(p, ctas, stream, pdl) : launch<false, 1, true>(p, ctas, stream, pdl);
  else
    g128 ? launch<true, 1, false>(p, ctas, stream, pdl) : launch<false, 1, false>(p, ctas, stream, pdl);
}

}  // namespace qserve::cuda::w4a8::gemv
