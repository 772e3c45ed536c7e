// Launch of the W4A8 decode kernels for 9 <= m <= 64 (kernels/gemm_w4a8_gemvc.cuh).
#include "backend/cuda/gemm_w4a8_gemvc.h"

#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_gemvc.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda::w4a8::gemvc {

namespace {

template <bool kG128, Kernel kKernel>
void launch(const KernelParams& p, cudaStream_t stream, bool pdl) {
  constexpr int kNT = kernel_tokens(kKernel) / 8, kWarps = kernel_warps(kKernel), kPerWarp = 8 / kWarps;
  constexpr int kChunk = kPerWarp == 2 && kNT == 8 ? 2 : 4;  // (registers)
  auto* kernel = &gemm_w4a8_gemvc_kernel<kG128, kNT, kWarps, kPerWarp, kChunk, ctas_per_sm(kKernel), 1>;
  constexpr int smem = kSmemBytes<kNT, kChunk>;
  if constexpr (smem + 2 * 1024 > 48 * 1024) {  // with the static epilogue factors, above the default 48 KB
    static std::once_flag once;
    std::call_once(once, [&] {
      QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    });
  }
  const dim3 grid((p.n + kTileChannels - 1) / kTileChannels * p.splits), block(32 * kWarps);
  if (p.splits > 1)
    launch_clustered(kernel, grid, block, smem, stream, pdl, p.splits, p);
  else
    launch_maybe_pdl(kernel, grid, block, smem, stream, pdl, p);
}

template <Kernel kKernel>
void launch_kind(bool g128, const KernelParams& p, cudaStream_t stream, bool pdl) {
  g128 ? launch<true, kKernel>(p, stream, pdl) : launch<false, kKernel>(p, stream, pdl);
}

}  // namespace

void launch_gemvc(bool g128, Kernel kernel, const KernelParams& p, cudaStream_t stream, bool pdl) {
  const int k = static_cast<int>(kernel);
  const int k64 = p.k / 64, per_split = 2 * p.kt_per_split;
  if (k < 0 || k >= kKernelCount || p.m < 1 || p.m > kernel_tokens(kernel) || p.k % 64 != 0 || p.n < 1 ||
      p.splits < 1 || p.splits > kMaxSplits || per_split < 2 || int64_t{per_split} * p.splits < k64 ||
      int64_t{per_split} * (p.splits - 1) >= k64)
    QS_CUDA_CHECK(cudaErrorInvalidValue);
  switch (kernel) {
    case Kernel::kGemvc16: return launch_kind<Kernel::kGemvc16>(g128, p, stream, pdl);
    case Kernel::kGemvc32: return launch_kind<Kernel::kGemvc32>(g128, p, stream, pdl);
    case Kernel::kGemvc64: return launch_kind<Kernel::kGemvc64>(g128, p, stream, pdl);
    case Kernel::kGemvc16x2: return launch_kind<Kernel::kGemvc16x2>(g128, p, stream, pdl);
    case Kernel::kGemvc32x2: return launch_kind<Kernel::kGemvc32x2>(g128, p, stream, pdl);
    case Kernel::kGemvc64x2: return launch_kind<Kernel::kGemvc64x2>(g128, p, stream, pdl);
  }
}

}  // namespace qserve::cuda::w4a8::gemvc
