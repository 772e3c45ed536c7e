// Launch with programmatic dependent launch (launch.h) and the two device
// instructions each such kernel executes first:
//   __global__ void k(...) { pdl_wait_and_trigger(); ... }
//   return launch_kernel(k, grid, block, smem, stream, args...);
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/attention/launch.h"
#include "backend/cuda/kernels/pdl.cuh"

namespace qserve::cuda {

// Waits until the previous grid of the stream has completed and its writes
// are visible (a no-op when launched without the attribute), then lets the
// next grid be scheduled once every block of this one has started. Call
// before any global memory access.
__device__ __forceinline__ void pdl_wait_and_trigger() {
  ptx::pdl_wait();
  ptx::pdl_trigger();
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when
// programmatic_launch(); a launch the attribute makes fail is retried plain.
// Returns the launch status (the attention and fused launchers report
// errors; launch_pdl.cuh's launch_maybe_pdl, for the GEMMs, throws).
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  if (programmatic_launch()) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...) == cudaSuccess) return cudaSuccess;
    (void)cudaGetLastError();  // a launch-configuration error: not sticky
  }
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
}

}  // namespace qserve::cuda
