// The push forms (3, 4 or 6 splits) of the sm_90a W4 cluster tiles, per-channel instantiations.
#include "backend/cuda/gemm_w4a8_wgmma_kernels.cuh"

namespace qserve::cuda::w4a8::wgmma {
template bool launch_kind_cl_push<false>(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
}  // namespace qserve::cuda::w4a8::wgmma
