// The sm_90a INT8-weight (s8) tiles, per-channel epilogue (W4 per-channel as UINT4 after the dequantization pass) instantiations.
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
QS_WGMMA_LAUNCH_KIND_S8(false)
}  // namespace qserve::cuda::w4a8::wgmma
