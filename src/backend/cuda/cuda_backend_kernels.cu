// Grid-stride loops over fp16 elements (these ops are a small share of a
// step; the heavy memory-bound ones live in kernels/fused_ops.cu).
#include "backend/cuda/cuda_backend_kernels.h"

#include <cuda_fp16.h>

#include <algorithm>

namespace qserve::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) { return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535)); }

__device__ __forceinline__ float h2f(uint16_t v) { return __half2float(__ushort_as_half(v)); }
__device__ __forceinline__ uint16_t f2h(float v) { return __half_as_ushort(__float2half_rn(v)); }

__global__ void add_kernel(uint16_t* x, const uint16_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    x[i] = f2h(h2f(x[i]) + h2f(y[i]));
}

__global__ void add_bias_kernel(uint16_t* y, const uint16_t* bias, int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = f2h(h2f(y[i]) + h2f(bias[i % cols]));
}

// i = r * cols + c over the [rows, cols] output; gate and up rows `stride` apart.
__global__ void silu_mul_kernel(const uint16_t* gate, const uint16_t* up, int64_t stride, int64_t cols, uint16_t* out,
                                int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t at = i / cols * stride + i % cols;
    const float g = h2f(gate[at]);
    out[i] = f2h(g / (1.0f + expf(-g)) * h2f(up[at]));
  }
}

__global__ void f16_to_f32_kernel(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = h2f(in[i]);
}

// grid (pages, pools): one block per (page, pool), 16-byte stores.
__global__ void zero_pages_kernel(uint8_t* const* pools, const int32_t* pages, int64_t page_bytes) {
  uint4* dst = reinterpret_cast<uint4*>(pools[blockIdx.y] + pages[blockIdx.x] * page_bytes);
  const uint4 z = make_uint4(0, 0, 0, 0);
  for (int64_t i = threadIdx.x; i < page_bytes / 16; i += blockDim.x) dst[i] = z;
}

}  // namespace

cudaError_t zero_pages(uint8_t* const* pools, int num_pools, const int32_t* pages, int num_pages, int64_t page_bytes,
                       cudaStream_t stream) {
  if (num_pools <= 0 || num_pages <= 0) return cudaSuccess;
  if (page_bytes % 16 != 0 || num_pools > 65535) return cudaErrorInvalidValue;
  zero_pages_kernel<<<dim3(num_pages, num_pools), kThreads, 0, stream>>>(pools, pages, page_bytes);
  return cudaGetLastError();
}

cudaError_t f16_to_f32(const uint16_t* in, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  f16_to_f32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

cudaError_t add_f16(uint16_t* x, const uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t add_bias_f16(uint16_t* y, const uint16_t* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  add_bias_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, bias, n, cols);
  return cudaGetLastError();
}

cudaError_t silu_mul_f16(const uint16_t* gate, const uint16_t* up, int64_t stride, int64_t rows, int64_t cols,
                         uint16_t* out, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  if (stride < cols) return cudaErrorInvalidValue;
  silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, up, stride, cols, out, n);
  return cudaGetLastError();
}

}  // namespace qserve::cuda
