// The sm_90a INT8-weight (s8) tiles, per-channel epilogue (W4 per-channel as UINT4 after the dequantization pass) instantiations.
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
template void launch_kind_s8<false>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int, cudaStream_t,
                                        bool);
}  // namespace qserve::cuda::w4a8::wgmma
