// The sm_90a INT8-weight (s8) tiles, epilogue without the zero-point term (g128 after the dequantization pass, W8A8) instantiations.
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
QS_WGMMA_LAUNCH_KIND_S8(true)
}  // namespace qserve::cuda::w4a8::wgmma
