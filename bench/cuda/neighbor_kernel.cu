// The GEMM benchmark's stand-in neighbor kernel (neighbor_kernel.h).
#include "neighbor_kernel.h"

#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace qserve::bench {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void neighbor_kernel(uint64_t ns, int trigger) {
  extern __shared__ uint8_t smem[];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (trigger) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const uint64_t t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
  if (threadIdx.x == 0) smem[0] = 0;  // (keeps the allocation)
}

// Reads n16 16-B words (grid-strided, four loads in flight a thread); the
// XOR of what it read is stored only if it equals `never` (never, for the
// buffers it is given: they hold zeros), so that the loads are not dropped.
__global__ void neighbor_reader_kernel(const int4* __restrict__ buf, size_t n16, int trigger, int never) {
  extern __shared__ uint8_t smem[];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (trigger) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  int acc = 0;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const int4 a = __ldcg(buf + i), b = __ldcg(buf + i + stride), c = __ldcg(buf + i + 2 * stride),
               d = __ldcg(buf + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n16; i += stride) {
    const int4 a = __ldcg(buf + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == never) smem[threadIdx.x & 127] = 1;  // (also keeps the allocation)
}

// One step of the code neighbor: four independent chains, each a multiply by
// an odd constant and an xor with a shift of itself (non-linear, so the
// compiler cannot fold the steps into one); step I's constants are its own,
// so no two steps share their instructions' immediates.
template <uint32_t I>
__device__ __forceinline__ void code_step(uint32_t (&v)[4]) {
  constexpr uint32_t k = (0x9E3779B1u * (I + 1u)) | 1u;
#pragma unroll
  for (uint32_t j = 0; j < 4; ++j) v[j] = (v[j] * (k + 2u * j)) ^ (v[j] >> ((I + j) % 13u + 3u));
}
template <uint32_t... I>
__device__ __forceinline__ void code_run(uint32_t (&v)[4], std::integer_sequence<uint32_t, I...>) {
  (code_step<I>(v), ...);
}

// Straight-line code of kNeighborCodeSteps steps; the result is stored only
// if it equals `never` (so that the chains are not dropped).
__global__ void neighbor_code_kernel(uint32_t seed, int trigger, uint32_t never) {
  extern __shared__ uint8_t smem[];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (trigger) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  uint32_t v[4] = {seed ^ threadIdx.x, seed + blockIdx.x, seed * 3u, ~seed};
  code_run(v, std::make_integer_sequence<uint32_t, kNeighborCodeSteps>{});
  if ((v[0] ^ v[1] ^ v[2] ^ v[3]) == never) smem[threadIdx.x & 127] = 1;  // (also keeps the allocation)
}

// Raises `kernel`'s dynamic shared memory limit when `smem_bytes` differs
// from the value it was last set to (`configured`, -1 at first).
template <typename K>
void allow_smem(K* kernel, int smem_bytes, int& configured) {
  if (configured == smem_bytes) return;
  QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  configured = smem_bytes;
}

}  // namespace

void launch_neighbor_reader(cudaStream_t stream, int sms, const void* buf, size_t bytes, int smem_bytes,
                            bool trigger) {
  static int configured = -1;
  allow_smem(neighbor_reader_kernel, smem_bytes, configured);
  neighbor_reader_kernel<<<sms, 512, smem_bytes, stream>>>(static_cast<const int4*>(buf), bytes / 16,
                                                           trigger ? 1 : 0, 0x5eed1e55);
  QS_CUDA_CHECK(cudaGetLastError());
}

void launch_neighbor_code(cudaStream_t stream, int sms, int smem_bytes, bool trigger) {
  static int configured = -1;
  allow_smem(neighbor_code_kernel, smem_bytes, configured);
  neighbor_code_kernel<<<sms, 128, smem_bytes, stream>>>(0x12345u, trigger ? 1 : 0, 0x5eed1e55u);
  QS_CUDA_CHECK(cudaGetLastError());
}

void launch_neighbor(cudaStream_t stream, int sms, double us, int smem_bytes, bool trigger) {
  static int configured = -1;
  allow_smem(neighbor_kernel, smem_bytes, configured);
  neighbor_kernel<<<sms, 128, smem_bytes, stream>>>(static_cast<uint64_t>(us * 1000.0), trigger ? 1 : 0);
  QS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace qserve::bench
