// The sm_90a W4A8 kernels, g128 stream-K instantiations of the decode tiles
// (256 x 8 .. 256 x 64 and the two-accumulator forms).
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
template void launch_kind_skd<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int, cudaStream_t,
                                   bool);
}  // namespace qserve::cuda::w4a8::wgmma
