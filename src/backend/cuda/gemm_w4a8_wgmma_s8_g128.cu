// The sm_90a INT8-weight (s8) tiles, epilogue without the zero-point term (g128 after the dequantization pass, W8A8) instantiations.
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
template void launch_kind_s8<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
}  // namespace qserve::cuda::w4a8::wgmma
