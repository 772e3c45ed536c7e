// The sm_90a producer-dequantizing (pd) tiles, per-channel instantiations.
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
QS_WGMMA_LAUNCH_KIND_PD(false)
}  // namespace qserve::cuda::w4a8::wgmma
