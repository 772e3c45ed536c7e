// The sm_90a W4A8 kernels, g128 stream-K instantiations (the large W4 tiles).
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
template void launch_kind_sk<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int, cudaStream_t,
                                   bool);
}  // namespace qserve::cuda::w4a8::wgmma
