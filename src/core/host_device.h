// QS_HOST_DEVICE marks small functions shared by the CPU reference and the CUDA
// kernels (one definition of an offset or a rounding, compiled for both sides).
#pragma once

#if defined(__CUDACC__)
#define QS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define QS_HOST_DEVICE inline
#endif
