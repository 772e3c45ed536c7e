// The sm_90a W4A8 kernels, g128 instantiations.
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
QS_WGMMA_LAUNCH_KIND(true)
}  // namespace qserve::cuda::w4a8::wgmma
