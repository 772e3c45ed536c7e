// Small device helpers shared by the attention and fused-op kernels:
// status checks, cp.async, warp reductions, fp16 bit tricks.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace qserve::cuda {

// Returns the launch status of the last kernel (launchers return it to the caller).
inline cudaError_t last_launch_status() { return cudaGetLastError(); }

// ---- cp.async (sm_80+) --------------------------------------------------------

// 16 bytes global -> shared; src_bytes = 0 zero-fills without reading.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
// a full 16-byte copy to a shared-memory address (no source size operand)
__device__ __forceinline__ void cp_async_16_full(uint32_t smem_addr, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr), "l"(gmem));
}
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---- reductions ---------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ---- fp16 bit tricks --------------------------------------------------------

__device__ __forceinline__ half2 as_half2(uint32_t u) { return *reinterpret_cast<half2*>(&u); }
__device__ __forceinline__ uint32_t as_u32(half2 h) { return *reinterpret_cast<uint32_t*>(&h); }

// 0x6400 | n is the fp16 value 1024 + n for n < 1024.
__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(bits));  // (a & b) | c
  return r;
}

// Nibbles (n, n + 4) of a little-endian word -> half2(1024 + e_n, 1024 + e_{n+4})
// for word >> (4 n) already applied by the caller.
__device__ __forceinline__ half2 nibble_pair_biased(uint32_t shifted) {
  return as_half2(lop3_and_or(shifted, 0x000F000Fu, 0x64006400u));
}
// Bytes (0, 1) or (2, 3) of a word -> half2(1024 + b_lo, 1024 + b_hi).
__device__ __forceinline__ half2 byte_pair_biased_lo(uint32_t w) { return as_half2(__byte_perm(w, 0x64646464u, 0x4140)); }
__device__ __forceinline__ half2 byte_pair_biased_hi(uint32_t w) { return as_half2(__byte_perm(w, 0x64646464u, 0x4342)); }

}  // namespace qserve::cuda
