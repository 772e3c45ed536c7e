// Kernel launch with programmatic dependent launch (PDL) optional.
//
// With `pdl`, the kernel may begin while the previous kernel of the stream
// finishes; it must then call ptx::pdl_wait() (kernels/pdl.cuh) before it
// touches that kernel's inputs or outputs. Without, an ordinary launch.
// Captured into a CUDA graph, the attribute becomes a programmatic edge.
// PDL needs compute capability 9.0: the planners ask pdl_enabled()
// (cuda_context.h). Included from .cu files only (the <<< >>> launch).
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace qserve::cuda {

template <typename... KArgs, typename... Args>
void launch_maybe_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                      Args&&... args) {
  if (!pdl) {
    kernel<<<grid, block, smem, stream>>>(static_cast<Args&&>(args)...);
    QS_CUDA_CHECK_LAUNCH();
    return;
  }
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
  QS_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<Args&&>(args)...));
}

}  // namespace qserve::cuda
