// Programmatic dependent launch (PDL, sm_90+), device side.
//
// A kernel launched with the programmatic-serialization attribute
// (backend/cuda/launch_pdl.h) may start while the previous kernel of its
// stream is still running. Before it reads anything that kernel wrote, or
// writes anything that kernel reads, it must call pdl_wait(): that blocks
// until the previous grid has completed and its memory is visible. Work that
// touches only data nobody writes during the step (the weights) may run
// before the wait: that is the point, the weight stream of a GEMM starts
// while the kernel before it (a norm, a quantization) drains.
//
// pdl_trigger() lets the next kernel of the stream be scheduled once every CTA
// of this grid has triggered or exited. It is always safe (the dependent still
// waits for this grid's completion in its pdl_wait); it only moves scheduling.
// Both are no-ops when the kernel was launched without the attribute or on
// architectures before sm_90.
#pragma once

namespace qserve::cuda::ptx {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace qserve::cuda::ptx
