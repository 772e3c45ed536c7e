// One thread block per row. A thread owns up to ITERS chunks of 8 fp16 values
// (16-byte loads, coalesced across the block) and keeps them in registers
// between the passes of the row (sum of squares, absmax, quantize), so each
// input byte is read once and each output byte written once.
#include "backend/cuda/kernels/fused_ops.h"

#include <cuda_fp16.h>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "quant/activation_quant.h"

namespace qserve::cuda {

namespace {

enum class RowOp { kRmsNorm, kSiluMul, kQuantize };

struct RowParams {
  const half* a;      // x (norm, quantize) or gate
  const half* b;      // up (silu) or null
  half* residual;     // norm: [rows, cols] in/out, or null
  const half* gamma;  // norm: [cols]
  int64_t stride;     // row stride of a / b in elements
  int cols;
  float eps;
  int8_t* q;          // [rows, cols] or null (fp16 output instead)
  half* scale;        // [rows]
  half* sum;          // [rows] or null
  half* out;          // fp16 output [rows, cols] (rmsnorm) or null
};

template <int THREADS>
__device__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  __syncthreads();  // red may still be read from a previous reduction
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = 0.f;
#pragma unroll
  for (int w = 0; w < THREADS / 32; ++w) r += red[w];
  return r;
}
template <int THREADS>
__device__ float block_max(float v, float* red) {
  v = warp_max(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
#pragma unroll
  for (int w = 1; w < THREADS / 32; ++w) r = fmaxf(r, red[w]);
  return r;
}

__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 v = __half22float2(as_half2(w[k]));
    f[2 * k] = v.x;
    f[2 * k + 1] = v.y;
  }
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint4 u;
  u.x = as_u32(__floats2half2_rn(f[0], f[1]));
  u.y = as_u32(__floats2half2_rn(f[2], f[3]));
  u.z = as_u32(__floats2half2_rn(f[4], f[5]));
  u.w = as_u32(__floats2half2_rn(f[6], f[7]));
  return u;
}

// SiLU(g) * u with the fast exp and divide (__expf, __fdividef: a few ulp
// from the reference's expf and IEEE division; g / inf = 0 for g << 0).
__device__ __forceinline__ float silu_mul(float g, float u) { return __fdividef(g, 1.f + __expf(-g)) * u; }

// The SiLU rows' INT8 code: y times the row's reciprocal scale (one IEEE
// division per row instead of one per element), rounded half to even. It is
// y / s within one ulp, so a code can differ from act_quantize_value by one
// only where y / s lies within an ulp of a rounding tie (the ops test counts
// and bounds those).
__device__ __forceinline__ int quantize_by_reciprocal(float y, float inv_s) {
  return max(-127, min(127, __float2int_rn(y * inv_s)));
}

template <RowOp OP, int THREADS, int ITERS>
__global__ void __launch_bounds__(THREADS) row_kernel(const RowParams p) {
  __shared__ float red[THREADS / 32];
  const int64_t row = blockIdx.x;
  const int chunks = p.cols / 8;
  float y[ITERS][8];
  float ss = 0.f, amax = 0.f;
  // every load of the row first: 2 x ITERS 16-byte loads in flight per thread
  uint4 ra[ITERS], rb[ITERS];
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int c = it * THREADS + threadIdx.x;
    if (c >= chunks) continue;
    const int64_t off = row * p.stride + c * 8;
    ra[it] = *reinterpret_cast<const uint4*>(p.a + off);
    if constexpr (OP == RowOp::kSiluMul) rb[it] = *reinterpret_cast<const uint4*>(p.b + off);
    if constexpr (OP == RowOp::kRmsNorm) {
      if (p.residual) rb[it] = *reinterpret_cast<const uint4*>(p.residual + row * p.cols + c * 8);
    }
  }
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int c = it * THREADS + threadIdx.x;
    if (c >= chunks) continue;
    unpack8(ra[it], y[it]);
    if constexpr (OP == RowOp::kRmsNorm) {
      if (p.residual) {
        float r[8];
        unpack8(rb[it], r);
#pragma unroll
        for (int k = 0; k < 8; ++k) y[it][k] = __half2float(__float2half_rn(__fadd_rn(y[it][k], r[k])));
        *reinterpret_cast<uint4*>(p.residual + row * p.cols + c * 8) = pack8(y[it]);
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) ss += y[it][k] * y[it][k];
    } else if constexpr (OP == RowOp::kSiluMul) {
      float u[8];
      unpack8(rb[it], u);
#pragma unroll
      for (int k = 0; k < 8; ++k) y[it][k] = silu_mul(y[it][k], u[k]);
    }
  }
  if constexpr (OP == RowOp::kRmsNorm) {
    const float total = block_sum<THREADS>(ss, red);
    const float inv = 1.f / sqrtf(total / p.cols + p.eps);
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int c = it * THREADS + threadIdx.x;
      if (c >= chunks) continue;
      float g[8];
      unpack8(*reinterpret_cast<const uint4*>(p.gamma + c * 8), g);
#pragma unroll
      for (int k = 0; k < 8; ++k) y[it][k] = __fmul_rn(__fmul_rn(y[it][k], inv), g[k]);
    }
  }
  if (p.out) {  // fp16 output, no quantization
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int c = it * THREADS + threadIdx.x;
      if (c < chunks) *reinterpret_cast<uint4*>(p.out + row * p.cols + c * 8) = pack8(y[it]);
    }
    return;
  }
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int c = it * THREADS + threadIdx.x;
    if (c >= chunks) continue;
#pragma unroll
    for (int k = 0; k < 8; ++k) amax = fmaxf(amax, fabsf(y[it][k]));
  }
  amax = block_max<THREADS>(amax, red);
  const half s_h = __float2half_rn(act_raw_scale(amax));
  const float s = __half2float(s_h);
  const float inv_s = s == 0.f ? 0.f : 1.f / s;
  float qsum = 0.f;  // integer-valued, exact in f32 below 2^24
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int c = it * THREADS + threadIdx.x;
    if (c >= chunks) continue;
    uint32_t packed[2] = {0, 0};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int v = OP == RowOp::kSiluMul ? quantize_by_reciprocal(y[it][k], inv_s) : act_quantize_value(y[it][k], s);
      qsum += static_cast<float>(v);
      packed[k / 4] |= (static_cast<uint32_t>(v) & 0xffu) << (8 * (k % 4));
    }
    *reinterpret_cast<uint2*>(p.q + row * p.cols + c * 8) = make_uint2(packed[0], packed[1]);
  }
  if (p.sum) qsum = block_sum<THREADS>(qsum, red);
  if (threadIdx.x == 0) {
    p.scale[row] = s_h;
    if (p.sum) p.sum[row] = __float2half_rn(__fmul_rn(s, qsum));
  }
}

// SiLU(gate) * up + per-row INT8 quantization (+ sum) for the MLP's wide rows
// (intermediate sizes 11008-14336): the row's products go to shared memory (4
// bytes per column, as two planes of float4 so that consecutive threads hit
// consecutive 16-byte words: no bank conflicts) instead of registers. A block
// then needs few registers and 2-5 blocks share an SM, so one block's loads
// overlap another's reductions and stores; the register-resident row_kernel
// fits one 256-thread block per SM at these widths and idles between its phases
// (50% of the copy ceiling measured). Same arithmetic, so the same bytes.
constexpr int kWideThreads = 256;
constexpr int kWideMaxSmem = 100 * 1024;  // at least 2 blocks per SM (227 KB)

__global__ void __launch_bounds__(kWideThreads) silu_mul_quant_wide_kernel(const RowParams p) {
  extern __shared__ float4 ys[];  // [2][chunks]: values 0-3 of chunk c at ys[c], 4-7 at ys[chunks + c]
  __shared__ float red[kWideThreads / 32];
  const int64_t row = blockIdx.x;
  const int chunks = p.cols / 8;
  float amax = 0.f;
#pragma unroll 4
  for (int c = threadIdx.x; c < chunks; c += kWideThreads) {
    const int64_t off = row * p.stride + c * 8;
    float g[8], u[8];
    unpack8(*reinterpret_cast<const uint4*>(p.a + off), g);
    unpack8(*reinterpret_cast<const uint4*>(p.b + off), u);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      g[k] = silu_mul(g[k], u[k]);  // as row_kernel<kSiluMul>
      amax = fmaxf(amax, fabsf(g[k]));
    }
    ys[c] = make_float4(g[0], g[1], g[2], g[3]);
    ys[chunks + c] = make_float4(g[4], g[5], g[6], g[7]);
  }
  amax = block_max<kWideThreads>(amax, red);  // its barriers also publish ys
  const half s_h = __float2half_rn(act_raw_scale(amax));
  const float s = __half2float(s_h);
  const float inv_s = s == 0.f ? 0.f : 1.f / s;
  int isum = 0;  // |sum| <= 127 x cols
#pragma unroll 4
  for (int c = threadIdx.x; c < chunks; c += kWideThreads) {
    const float4 lo = ys[c], hi = ys[chunks + c];
    const float y[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    uint32_t packed[2] = {0, 0};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int v = quantize_by_reciprocal(y[k], inv_s);
      isum += v;
      packed[k / 4] |= (static_cast<uint32_t>(v) & 0xffu) << (8 * (k % 4));
    }
    *reinterpret_cast<uint2*>(p.q + row * p.cols + c * 8) = make_uint2(packed[0], packed[1]);
  }
  float qsum = static_cast<float>(isum);  // exact: |isum| < 2^24 per thread
  if (p.sum) qsum = block_sum<kWideThreads>(qsum, red);
  if (threadIdx.x == 0) {
    p.scale[row] = s_h;
    if (p.sum) p.sum[row] = __float2half_rn(__fmul_rn(s, qsum));
  }
}

template <RowOp OP, int THREADS>
cudaError_t launch_iters(const RowParams& p, int rows, cudaStream_t stream) {
  const int chunks = p.cols / 8;
  const int iters = (chunks + THREADS - 1) / THREADS;
  if (iters <= 1) row_kernel<OP, THREADS, 1><<<rows, THREADS, 0, stream>>>(p);
  else if (iters <= 2) row_kernel<OP, THREADS, 2><<<rows, THREADS, 0, stream>>>(p);
  else if (iters <= 4) row_kernel<OP, THREADS, 4><<<rows, THREADS, 0, stream>>>(p);
  else if (iters <= 8 && THREADS <= 256) row_kernel<OP, THREADS <= 256 ? THREADS : 256, 8><<<rows, THREADS, 0, stream>>>(p);
  else return cudaErrorInvalidValue;  // 1024 threads x 8 chunks would spill
  return cudaGetLastError();
}

template <RowOp OP>
cudaError_t launch_row(const RowParams& p, int rows, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (p.cols <= 0 || p.cols % 8 != 0 || p.stride % 8 != 0) return cudaErrorInvalidValue;
  const int chunks = p.cols / 8;
  // small blocks for rows up to 4096: more rows in flight per SM while a
  // block waits in its reductions
  if (chunks <= 128 * 4) return launch_iters<OP, 128>(p, rows, stream);
  if (chunks <= 256 * 8) return launch_iters<OP, 256>(p, rows, stream);
  return launch_iters<OP, 1024>(p, rows, stream);
}

RowParams quant_params(const Int8Rows& out) {
  RowParams p{};
  p.q = out.q;
  p.scale = reinterpret_cast<half*>(out.scale);
  p.sum = reinterpret_cast<half*>(out.sum);
  return p;
}

__global__ void gather_kernel(const uint4* table, int64_t vocab, const int32_t* ids, int chunks, uint4* out) {
  const int64_t row = blockIdx.x;
  const int32_t id = ids[row];
  const bool ok = id >= 0 && id < vocab;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x)
    out[row * chunks + c] = ok ? table[static_cast<int64_t>(id) * chunks + c] : make_uint4(0, 0, 0, 0);
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

cudaError_t rmsnorm_quant(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int rows, int cols, float eps,
                          const Int8Rows& out, cudaStream_t stream) {
  RowParams p = quant_params(out);
  p.a = reinterpret_cast<const half*>(x);
  p.residual = reinterpret_cast<half*>(residual);
  p.gamma = reinterpret_cast<const half*>(gamma);
  p.stride = cols;
  p.cols = cols;
  p.eps = eps;
  return launch_row<RowOp::kRmsNorm>(p, rows, stream);
}

cudaError_t rmsnorm(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int rows, int cols, float eps,
                    uint16_t* out, cudaStream_t stream) {
  RowParams p{};
  p.a = reinterpret_cast<const half*>(x);
  p.residual = reinterpret_cast<half*>(residual);
  p.gamma = reinterpret_cast<const half*>(gamma);
  p.stride = cols;
  p.cols = cols;
  p.eps = eps;
  p.out = reinterpret_cast<half*>(out);
  return launch_row<RowOp::kRmsNorm>(p, rows, stream);
}

cudaError_t silu_mul_quant(const uint16_t* gate, const uint16_t* up, int64_t stride, int rows, int cols,
                           const Int8Rows& out, cudaStream_t stream) {
  RowParams p = quant_params(out);
  p.a = reinterpret_cast<const half*>(gate);
  p.b = reinterpret_cast<const half*>(up);
  p.stride = stride;
  p.cols = cols;
  const size_t smem = static_cast<size_t>(cols) * sizeof(float);
  const bool wide = cols >= 8192 && cols % 8 == 0 && stride % 8 == 0 && smem <= kWideMaxSmem;
  if (!wide || rows <= 0) return launch_row<RowOp::kSiluMul>(p, rows, stream);
  static const cudaError_t attr = cudaFuncSetAttribute(silu_mul_quant_wide_kernel,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kWideMaxSmem);
  if (attr != cudaSuccess) return attr;
  silu_mul_quant_wide_kernel<<<rows, kWideThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t quantize_int8(const uint16_t* x, int rows, int cols, const Int8Rows& out, cudaStream_t stream) {
  RowParams p = quant_params(out);
  p.a = reinterpret_cast<const half*>(x);
  p.stride = cols;
  p.cols = cols;
  return launch_row<RowOp::kQuantize>(p, rows, stream);
}

cudaError_t embedding_gather(const uint16_t* table, int64_t vocab, const int32_t* ids, int rows, int cols,
                             uint16_t* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (cols % 8 != 0) return cudaErrorInvalidValue;
  gather_kernel<<<rows, 256, 0, stream>>>(reinterpret_cast<const uint4*>(table), vocab, ids, cols / 8,
                                          reinterpret_cast<uint4*>(out));
  return cudaGetLastError();
}

cudaError_t copy_bytes(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes % 16 != 0) return cudaErrorInvalidValue;
  copy_kernel<<<132 * 16, 256, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16);
  return cudaGetLastError();
}

}  // namespace qserve::cuda
