// Launch of the W4A8 decode kernels for m <= 8 / 16 (kernels/gemm_w4a8_gemv.cuh).
#include "backend/cuda/gemm_w4a8_gemv.h"

#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_gemv.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda::w4a8::gemv {

namespace {

template <bool kG128, Kernel kKernel, bool kRing>
void launch(const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  constexpr int kNT = kernel_tokens(kKernel) / 8;
  auto* kernel = &gemm_w4a8_gemv_kernel<kG128, kNT, kRing, ctas_per_sm(kKernel), chunks_ahead(kKernel)>;
  constexpr int smem = kRing ? kSmemBytes<kNT> : 0;
  if constexpr (smem > 48 * 1024) {
    static std::once_flag once;  // above the default 48 KB of dynamic shared memory
    std::call_once(once, [&] {
      QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    });
  }
  launch_maybe_pdl(kernel, dim3(ctas), dim3(kThreads), smem, stream, pdl, p);
}

template <Kernel kKernel, bool kRing>
void launch_kind(bool g128, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  g128 ? launch<true, kKernel, kRing>(p, ctas, stream, pdl) : launch<false, kKernel, kRing>(p, ctas, stream, pdl);
}

}  // namespace

void launch_gemv(bool g128, Kernel kernel, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  const int k = static_cast<int>(kernel);
  if (k < 0 || k >= kKernelCount || p.m < 1 || p.m > kernel_tokens(kernel) || p.k % 64 != 0 || p.n < 1 || ctas < 1)
    QS_CUDA_CHECK(cudaErrorInvalidValue);
  const bool ring = kernel_tokens(kernel) == 16 || p.m > kMaxDirectTokens;
  switch (kernel) {
    case Kernel::kGemv8:
      return ring ? launch_kind<Kernel::kGemv8, true>(g128, p, ctas, stream, pdl)
                  : launch_kind<Kernel::kGemv8, false>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv8Deep:
      return ring ? launch_kind<Kernel::kGemv8Deep, true>(g128, p, ctas, stream, pdl)
                  : launch_kind<Kernel::kGemv8Deep, false>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv16: return launch_kind<Kernel::kGemv16, true>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv16Deep: return launch_kind<Kernel::kGemv16Deep, true>(g128, p, ctas, stream, pdl);
  }
}

}  // namespace qserve::cuda::w4a8::gemv
