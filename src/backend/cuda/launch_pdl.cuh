// Kernel launches with programmatic dependent launch (PDL), three ways:
//   launch_kernel(k, ...): with the attribute when the process-wide switch of
//     launch_pdl.h is on (the attention and fused kernels, which execute
//     pdl_wait_and_trigger() first);
//   launch_maybe_pdl(k, ..., pdl, ...): the caller decides (the GEMMs, whose
//     planner asks pdl_enabled(), cuda_context.h: that switch and the device);
//   launch_clustered(k, ..., pdl, cluster_x, ...): the same, with the blocks
//     in thread block clusters (the W4A8 cluster tiles' split-K).
//
// With `pdl`, the kernel may begin while the previous kernel of the stream
// finishes; it must then call ptx::pdl_wait() (kernels/pdl.cuh) before it
// touches that kernel's inputs or outputs. Without, an ordinary launch.
// Captured into a CUDA graph, the attribute becomes a programmatic edge.
// PDL needs compute capability 9.0: the planners ask pdl_enabled()
// (cuda_context.h). Included from .cu files only (the <<< >>> launch).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/pdl.cuh"
#include "backend/cuda/launch_pdl.h"

namespace qserve::cuda {

namespace detail {
// One cudaLaunchKernelEx with the programmatic-serialization attribute when
// `pdl` and a cluster dimension (cluster_x consecutive blocks) when
// cluster_x > 0.
template <typename... KArgs, typename... Args>
cudaError_t launch_ex(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                      int cluster_x, Args&&... args) {
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_x > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = static_cast<unsigned>(cluster_x);
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// One launch with the programmatic-serialization attribute.
template <typename... KArgs, typename... Args>
cudaError_t launch_with_pdl_attribute(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                      cudaStream_t stream, Args&&... args) {
  return launch_ex(kernel, grid, block, smem, stream, true, 0, std::forward<Args>(args)...);
}
}  // namespace detail

// With `pdl`, the attribute; without, an ordinary launch. Throws on a launch
// error (QS_CUDA_CHECK).
template <typename... KArgs, typename... Args>
void launch_maybe_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                      Args&&... args) {
  if (pdl) {
    QS_CUDA_CHECK(detail::launch_with_pdl_attribute(kernel, grid, block, smem, stream, std::forward<Args>(args)...));
    return;
  }
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
  QS_CUDA_CHECK_LAUNCH();
}

// A launch whose blocks form clusters of `cluster_x` consecutive blocks
// (grid.x a multiple of it), with the PDL attribute when `pdl`. Throws on a
// launch error.
template <typename... KArgs, typename... Args>
void launch_clustered(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                      int cluster_x, Args&&... args) {
  QS_CUDA_CHECK(detail::launch_ex(kernel, grid, block, smem, stream, pdl, cluster_x, std::forward<Args>(args)...));
}

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
// Returns the launch status (the attention and fused launchers report errors).
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  if (programmatic_launch()) {
    if (detail::launch_with_pdl_attribute(kernel, grid, block, smem, stream, args...) == cudaSuccess)
      return cudaSuccess;
    (void)cudaGetLastError();  // a launch-configuration error: not sticky
  }
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
}

}  // namespace qserve::cuda
