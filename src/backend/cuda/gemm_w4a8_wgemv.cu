// Launch of the wgmma decode kernels for m <= 16 / 32 / 64 (kernels/gemm_w4a8_wgemv.cuh).
#include "backend/cuda/gemm_w4a8_wgemv.h"

#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_wgemv.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda::w4a8::wgemv {

namespace {

// The dynamic shared memory a launch may opt in to (sm_90: 227 KB).
constexpr int kSmemOptin = 232448;

template <bool kG128, int kN>
void launch(const KernelParams& p, cudaStream_t stream, bool pdl) {
  auto* kernel = &gemm_w4a8_wgemv_kernel<kG128, kN>;
  static std::once_flag once;
  std::call_once(once, [&] {
    QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemOptin));
  });
  const size_t smem = smem_bytes(kN, p.k, p.splits);
  if (smem > size_t{kSmemOptin}) QS_CUDA_CHECK(cudaErrorInvalidValue);  // (the planner refuses such shapes)
  const dim3 grid((p.n + kTileChannels - 1) / kTileChannels * p.splits);
  if (p.splits > 1)
    launch_clustered(kernel, grid, dim3(kThreads), smem, stream, pdl, p.splits, p);
  else
    launch_maybe_pdl(kernel, grid, dim3(kThreads), smem, stream, pdl, p);
}

template <int kN>
void launch_kind(bool g128, const KernelParams& p, cudaStream_t stream, bool pdl) {
  g128 ? launch<true, kN>(p, stream, pdl) : launch<false, kN>(p, stream, pdl);
}

}  // namespace

void launch_wgemv(bool g128, int kernel, const KernelParams& p, cudaStream_t stream, bool pdl) {
  if (kernel < 0 || kernel >= kKernelCount || p.m < 1 || p.m > kernel_tokens(kernel) || p.k % 64 != 0 || p.n < 1 ||
      p.splits < 1 || p.splits > kMaxSplits)
    QS_CUDA_CHECK(cudaErrorInvalidValue);
  switch (kernel) {
    case 0: return launch_kind<16>(g128, p, stream, pdl);
    case 1: return launch_kind<32>(g128, p, stream, pdl);
    default: return launch_kind<64>(g128, p, stream, pdl);
  }
}

}  // namespace qserve::cuda::w4a8::wgemv
