#include "backend/cuda/tensor_map.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_check.h"

namespace qserve::cuda {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult result{};
    QS_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &result));
    if (result != cudaDriverEntryPointSuccess || !f) QS_CUDA_CHECK(cudaErrorSymbolNotFound);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace qserve::cuda
