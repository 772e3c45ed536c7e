// Launch of the W4A8 decode kernels for m <= 8 / 16 / 32 (kernels/gemm_w4a8_gemv.cuh).
#include "backend/cuda/gemm_w4a8_gemv.h"

#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_gemv.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda::w4a8::gemv {

namespace {

template <bool kG128, Kernel kKernel, XSource kX>
void launch(const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  constexpr int kNT = kernel_tokens(kKernel) / 8, kW = kernel_warps(kKernel);
  auto* kernel = &gemm_w4a8_gemv_kernel<kG128, kNT, kX, kW, ctas_per_sm(kKernel), chunks_ahead(kKernel)>;
  // the ring's fixed size, or the resident rows' (by k), opted in up to the device's limit once
  constexpr int kMaxSmem = kX == XSource::kRing ? kSmemBytes<kNT> : kX == XSource::kResident ? static_cast<int>(kMaxResidentSmem) : 0;
  const size_t smem = kX == XSource::kResident ? resident_smem_bytes(kKernel, kG128, p.k) : size_t{kMaxSmem};
  if (smem > size_t{kMaxSmem}) QS_CUDA_CHECK(cudaErrorInvalidValue);  // (the planner refuses such shapes)
  if constexpr (kMaxSmem > 48 * 1024) {
    static std::once_flag once;  // above the default 48 KB of dynamic shared memory
    std::call_once(once, [&] {
      QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
    });
  }
  launch_maybe_pdl(kernel, dim3(ctas), dim3(32 * kW), smem, stream, pdl, p);
}

template <Kernel kKernel, XSource kX>
void launch_kind(bool g128, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  g128 ? launch<true, kKernel, kX>(p, ctas, stream, pdl) : launch<false, kKernel, kX>(p, ctas, stream, pdl);
}

}  // namespace

void launch_gemv(bool g128, Kernel kernel, const KernelParams& p, int ctas, cudaStream_t stream, bool pdl) {
  const int k = static_cast<int>(kernel);
  if (k < 0 || k >= kKernelCount || p.m < 1 || p.m > kernel_tokens(kernel) || p.k % 64 != 0 || p.n < 1 || ctas < 1)
    QS_CUDA_CHECK(cudaErrorInvalidValue);
  const XSource x8 = p.m > kMaxDirectTokens ? XSource::kRing : XSource::kDirect;  // the 8-token kernels
  switch (kernel) {
    case Kernel::kGemv8:
      return x8 == XSource::kRing ? launch_kind<Kernel::kGemv8, XSource::kRing>(g128, p, ctas, stream, pdl)
                                  : launch_kind<Kernel::kGemv8, XSource::kDirect>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv8Deep:
      return x8 == XSource::kRing ? launch_kind<Kernel::kGemv8Deep, XSource::kRing>(g128, p, ctas, stream, pdl)
                                  : launch_kind<Kernel::kGemv8Deep, XSource::kDirect>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv16: return launch_kind<Kernel::kGemv16, XSource::kRing>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv16Deep: return launch_kind<Kernel::kGemv16Deep, XSource::kRing>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv8Resident:
      return launch_kind<Kernel::kGemv8Resident, XSource::kResident>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv16Resident:
      return launch_kind<Kernel::kGemv16Resident, XSource::kResident>(g128, p, ctas, stream, pdl);
    case Kernel::kGemv32Resident:
      return launch_kind<Kernel::kGemv32Resident, XSource::kResident>(g128, p, ctas, stream, pdl);
  }
}

}  // namespace qserve::cuda::w4a8::gemv
