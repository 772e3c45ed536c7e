// One thread block per row (plain quantization of rows up to 4096 columns:
// one warp per row). A thread owns up to ITERS chunks of 8 fp16 values
// (16-byte loads, coalesced across the block) and keeps them in registers
// between the passes of the row (sum of squares, absmax, quantize), so each
// input byte is read once and each output byte written once. INT8 codes
// without a division per element (quantize8), bit-exact with the CPU. Every
// kernel but the copy is launched with programmatic dependent launch
// (launch_pdl.h).
#include "backend/cuda/kernels/fused_ops.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <utility>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "backend/cuda/kernels/cluster_row_reduce.cuh"
#include "backend/cuda/kernels/row_quant.cuh"
#include "backend/cuda/launch_pdl.cuh"
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
  int32_t* code_sum;  // [rows] or null: the exact code sum (Int8Rows::code_sum)
  half* out;          // fp16 output [rows, cols] (rmsnorm) or null
  int trigger_first;  // 1: let the dependents launch before the PDL wait (pdl_sync)
};

// Launches of at most this many rows let their dependents (the next GEMM)
// launch before their own PDL wait, so that GEMM's blocks may be scheduled
// while this kernel still waits for the GEMM before it, and stream their
// weights meanwhile. Round 54 (H100): at one row Llama-3-8B's decode rate
// +2.7% (every pass above), its layer's GEMM chain -5%; at 16 rows the chain
// gained on Llama-3.2-1B (-3.3%) but lost on Llama-3-8B (+2.5%), and at 64
// rows Llama-3.2-1B's lost 3% (the GEMM after the SiLU and the quantization
// waited longer), so larger launches wait first (launch_pdl.cuh's order).
constexpr int kTriggerFirstMaxRows = 8;

// PDL at a launch's start (launch_pdl.cuh): trigger then wait, or wait then
// trigger (pdl_wait_and_trigger). Both orders are correct: the dependent's own
// wait returns only once this grid has completed.
__device__ __forceinline__ void pdl_sync(int trigger_first) {
  if (trigger_first) ptx::pdl_trigger();
  ptx::pdl_wait();
  if (!trigger_first) ptx::pdl_trigger();
}

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

// SiLU(g) * u with the fast exp and divide (__expf, __fdividef: a few ulp
// from the reference's expf and IEEE division; g / inf = 0 for g << 0).
__device__ __forceinline__ float silu_mul(float g, float u) { return __fdividef(g, 1.f + __expf(-g)) * u; }

// The SiLU rows' INT8 code: y times the row's reciprocal scale, rounded half to
// even (no tie check: the SiLU values differ from the CPU's by a few ulp
// anyway, __expf / __fdividef). It is y / s within one ulp, so a code can
// differ from act_quantize_value by one only where y / s lies within an ulp of
// a rounding tie (the ops test counts and bounds those). The exact path's tie
// check and its rare recomputation measured 8-9% slower on these rows.
__device__ __forceinline__ int quantize_by_reciprocal(float y, float inv_s) {
  return max(-127, min(127, __float2int_rn(y * inv_s)));
}
// Eight SiLU values' codes (quantize_by_reciprocal) packed as 8 bytes; their
// sum added to isum.
__device__ __forceinline__ uint2 quantize8_by_reciprocal(const float (&y)[8], float inv_s, int& isum) {
  uint32_t v[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int code = quantize_by_reciprocal(y[k], inv_s);
    isum += code;
    v[k] = static_cast<uint32_t>(code);
  }
  return make_uint2(pack_low_bytes(v[0], v[1], v[2], v[3]), pack_low_bytes(v[4], v[5], v[6], v[7]));
}

template <RowOp OP, int THREADS, int ITERS>
__global__ void __launch_bounds__(THREADS) row_kernel(const RowParams p) {
  __shared__ float red[THREADS / 32];
  const int64_t row = blockIdx.x;
  const int chunks = p.cols / 8;
  // The norm's gamma is a weight (no kernel of the stream writes it): its
  // loads go out before the dependency wait, so they are not one more memory
  // round trip after the row's reduction (a decode step runs this kernel on
  // one row per sequence, where such round trips are most of its time).
  // Not in the 1024-thread blocks (rows over 16384 columns), whose 64
  // registers a thread would then spill.
  constexpr bool kGammaEarly = OP == RowOp::kRmsNorm && THREADS <= 256;
  uint4 graw[kGammaEarly ? ITERS : 1];
  if constexpr (kGammaEarly) {
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int c = it * THREADS + threadIdx.x;
      if (c < chunks) graw[it] = *reinterpret_cast<const uint4*>(p.gamma + c * 8);
    }
  }
  pdl_sync(p.trigger_first);  // launch.h
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
      if constexpr (kGammaEarly) unpack8(graw[it], g);
      else unpack8(*reinterpret_cast<const uint4*>(p.gamma + c * 8), g);
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
  const RowQuant rq = row_quant(s);
  const float inv_recip = s == 0.f ? 0.f : 1.f / s;  // SiLU rows
  uint32_t acc = 0;
  int codes = 0, isum = 0;
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int c = it * THREADS + threadIdx.x;
    if (c >= chunks) continue;
    uint2 packed;
    if constexpr (OP == RowOp::kSiluMul) {
      packed = quantize8_by_reciprocal(y[it], inv_recip, isum);
    } else {
      packed = quantize8(y[it], rq, acc);
      codes += 8;
    }
    *reinterpret_cast<uint2*>(p.q + row * p.cols + c * 8) = packed;
  }
  // exact: |sum| <= 127 x 32768 < 2^24
  float qsum = static_cast<float>(OP == RowOp::kSiluMul ? isum : quant_sum(acc, codes));
  if (p.sum || p.code_sum) qsum = block_sum<THREADS>(qsum, red);
  if (threadIdx.x == 0) {
    p.scale[row] = s_h;
    if (p.sum) p.sum[row] = __float2half_rn(__fmul_rn(s, qsum));
    if (p.code_sum) p.code_sum[row] = static_cast<int32_t>(qsum);
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
  pdl_sync(p.trigger_first);  // launch.h
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
    *reinterpret_cast<uint2*>(p.q + row * p.cols + c * 8) = quantize8_by_reciprocal(y, inv_s, isum);
  }
  float qsum = static_cast<float>(isum);  // exact: |isum| < 2^24
  if (p.sum || p.code_sum) qsum = block_sum<kWideThreads>(qsum, red);
  if (threadIdx.x == 0) {
    p.scale[row] = s_h;
    if (p.sum) p.sum[row] = __float2half_rn(__fmul_rn(s, qsum));
    if (p.code_sum) p.code_sum[row] = static_cast<int32_t>(qsum);
  }
}

// SiLU(gate) * up + per-row INT8 quantization (+ sum) of few wide rows (a
// decode step: one row per sequence). A cluster of kSiluCluster blocks per
// row, block `rank` taking chunks [rank * per_block, + per_block) of 8
// columns, one chunk per thread, so every load of the row is in flight at
// once on 8 SMs; the row's absmax and code sum meet through distributed
// shared memory (kernels/cluster_row_reduce.cuh). The arithmetic of
// silu_mul_quant_wide_kernel (the same SiLU values, absmax, reciprocal and
// codes), so the same bytes. The one-block-per-
// row kernels walk a 14336-column row in a chain of dependent loads on one SM
// while the others idle (5.6 us a row at one sequence on the H200).
constexpr int kSiluCluster = 8;
// Up to 64 rows (32 before round 54): at 64 rows the clusters (512 blocks)
// took 1.7-2.0 us off a decode layer's GEMM chain against the shared-memory
// kernel's 64 blocks (Llama-3.2-1B / Llama-3-8B shapes, H100), +2.6% / +1.2%
// of the engine's decode rate at 64 sequences. More rows fill the GPU with
// one block each.
constexpr int kSiluClusterMaxRows = 64;

__global__ void silu_mul_quant_cluster_kernel(const RowParams p, int per_block) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  __shared__ float amax_of[kSiluCluster];
  __shared__ int sum_of[kSiluCluster];
  __shared__ float warp_amax[32];
  __shared__ int warp_isum[32];
  cg::cluster_group cluster = cg::this_cluster();
  auto started = cluster.barrier_arrive();
  pdl_sync(p.trigger_first);  // launch.h
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / C;
  const int t = threadIdx.x;
  const int c = rank * per_block + t;
  const bool active = t < per_block && c < p.cols / 8;
  float y[8];
  float amax = 0.f;
  if (active) {
    const int64_t off = row * p.stride + static_cast<int64_t>(c) * 8;
    float u[8];
    unpack8(*reinterpret_cast<const uint4*>(p.a + off), y);
    unpack8(*reinterpret_cast<const uint4*>(p.b + off), u);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      y[k] = silu_mul(y[k], u[k]);
      amax = fmaxf(amax, fabsf(y[k]));
    }
  }
  const float m = cluster_row_max(cluster, std::move(started), amax, warp_amax, amax_of, 0.f,
                                  [](float a, float b) { return fmaxf(a, b); });
  const half s_h = __float2half_rn(act_raw_scale(m));
  const float s = __half2float(s_h);
  const float inv_s = s == 0.f ? 0.f : 1.f / s;
  int isum = 0;  // |sum| <= 127 x cols
  if (active)
    *reinterpret_cast<uint2*>(p.q + row * p.cols + static_cast<int64_t>(c) * 8) = quantize8_by_reciprocal(y, inv_s, isum);
  if (p.sum != nullptr || p.code_sum != nullptr) {
    const int total = cluster_row_sum(cluster, isum, warp_isum, sum_of);  // exact in f32: |total| < 2^24
    if (rank == 0 && t == 0) {
      if (p.sum) p.sum[row] = __float2half_rn(__fmul_rn(s, static_cast<float>(total)));
      if (p.code_sum) p.code_sum[row] = total;
    }
  }
  if (rank == 0 && t == 0) p.scale[row] = s_h;
#else
  __trap();  // launched only where the host found sm_90 code (silu_mul_quant)
#endif
}

// Plain quantization (+ sum) of rows up to 4096 columns (the o_proj input),
// one warp per row: lane l owns chunks l, l + 32, ... of 8 fp16 values (16-byte
// loads, all issued before the first use, kept as raw fp16 in registers), the
// absmax on the fp16 bit patterns (exact), the reductions by shuffles: no
// block barrier, and each warp finishes its row independently. The block-per-
// row kernel (two block reductions) measured 63-70% of the copy ceiling.
constexpr int kQuantWarps = 2;  // rows per block

template <int ITERS>
__global__ void __launch_bounds__(kQuantWarps * 32) quantize_warp_kernel(const half* __restrict__ x, int rows, int cols,
                                                                          int8_t* __restrict__ q, half* scale,
                                                                          half* sum, int32_t* code_sum,
                                                                          int trigger_first) {
  pdl_sync(trigger_first);  // launch.h
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kQuantWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int chunks = cols / 8;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * cols);
  uint4 raw[ITERS];
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int c = it * 32 + lane;
    raw[it] = c < chunks ? xr[c] : make_uint4(0, 0, 0, 0);
  }
  // |x| as fp16 bit patterns (sign cleared) orders like unsigned integers
  uint32_t m2 = 0;
#pragma unroll
  for (int it = 0; it < ITERS; ++it) m2 = absmax_bits(m2, raw[it]);
  uint32_t mh = halves_max(m2);
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) mh = max(mh, __shfl_xor_sync(0xffffffffu, mh, o));
  const float amax = __half2float(__ushort_as_half(static_cast<unsigned short>(mh)));
  const half s_h = __float2half_rn(act_raw_scale(amax));
  const float s = __half2float(s_h);
  const RowQuant rq = row_quant(s);
  uint32_t acc = 0;
  int codes = 0;
  uint2* qr = reinterpret_cast<uint2*>(q + row * cols);
#pragma unroll
  for (int it = 0; it < ITERS; ++it) {
    const int c = it * 32 + lane;
    if (c >= chunks) continue;
    float y[8];
    unpack8(raw[it], y);
    qr[c] = quantize8(y, rq, acc);
    codes += 8;
  }
  int isum = quant_sum(acc, codes);
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) isum += __shfl_xor_sync(0xffffffffu, isum, o);
  if (lane == 0) {
    scale[row] = s_h;
    if (sum) sum[row] = __float2half_rn(__fmul_rn(s, static_cast<float>(isum)));  // |isum| < 2^24: exact
    if (code_sum) code_sum[row] = isum;
  }
}

template <int ITERS>
cudaError_t launch_quantize_warp(const RowParams& p, int rows, cudaStream_t stream) {
  const int blocks = (rows + kQuantWarps - 1) / kQuantWarps;
  return launch_kernel(quantize_warp_kernel<ITERS>, dim3(blocks), dim3(kQuantWarps * 32), 0, stream, p.a, rows, p.cols,
                       p.q, p.scale, p.sum, p.code_sum, p.trigger_first);
}

template <RowOp OP, int THREADS>
cudaError_t launch_iters(const RowParams& p, int rows, cudaStream_t stream) {
  const int chunks = p.cols / 8;
  const int iters = (chunks + THREADS - 1) / THREADS;
  const dim3 grid(rows), block(THREADS);
  if (iters <= 1) return launch_kernel(row_kernel<OP, THREADS, 1>, grid, block, 0, stream, p);
  if (iters <= 2) return launch_kernel(row_kernel<OP, THREADS, 2>, grid, block, 0, stream, p);
  if (iters <= 4) return launch_kernel(row_kernel<OP, THREADS, 4>, grid, block, 0, stream, p);
  if (iters <= 8 && THREADS <= 256) return launch_kernel(row_kernel<OP, THREADS <= 256 ? THREADS : 256, 8>, grid, block, 0, stream, p);
  return cudaErrorInvalidValue;  // 1024 threads x 8 chunks would spill
}

template <RowOp OP>
cudaError_t launch_row(RowParams p, int rows, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  p.trigger_first = rows <= kTriggerFirstMaxRows;
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
  p.code_sum = out.code_sum;
  return p;
}

__global__ void gather_kernel(const uint4* table, int64_t vocab, const int32_t* ids, int chunks, uint4* out) {
  pdl_wait_and_trigger();  // launch.h
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
  p.trigger_first = rows <= kTriggerFirstMaxRows;
  if (rows > 0 && rows <= kSiluClusterMaxRows && cols >= 2048 && cols % 8 == 0 && stride % 8 == 0) {
    static const bool clusters = cluster_launch_supported(reinterpret_cast<const void*>(silu_mul_quant_cluster_kernel));
    const int per_block = (cols / 8 + kSiluCluster - 1) / kSiluCluster;
    const int threads = (per_block + 31) / 32 * 32;
    if (clusters && threads <= 1024) {
      const dim3 grid(static_cast<unsigned>(rows) * kSiluCluster), block(threads);
      if (programmatic_launch() &&
          detail::launch_ex(silu_mul_quant_cluster_kernel, grid, block, 0, stream, true, kSiluCluster, p, per_block) ==
              cudaSuccess)
        return cudaSuccess;
      (void)cudaGetLastError();  // a launch-configuration error: not sticky
      return detail::launch_ex(silu_mul_quant_cluster_kernel, grid, block, 0, stream, false, kSiluCluster, p, per_block);
    }
  }
  const size_t smem = static_cast<size_t>(cols) * sizeof(float);
  const bool wide = cols >= 8192 && cols % 8 == 0 && stride % 8 == 0 && smem <= kWideMaxSmem;
  if (!wide || rows <= 0) return launch_row<RowOp::kSiluMul>(p, rows, stream);
  static const cudaError_t attr = cudaFuncSetAttribute(silu_mul_quant_wide_kernel,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kWideMaxSmem);
  if (attr != cudaSuccess) return attr;
  return launch_kernel(silu_mul_quant_wide_kernel, dim3(rows), dim3(kWideThreads), smem, stream, p);
}

cudaError_t quantize_int8(const uint16_t* x, int rows, int cols, const Int8Rows& out, cudaStream_t stream) {
  RowParams p = quant_params(out);
  p.a = reinterpret_cast<const half*>(x);
  p.stride = cols;
  p.cols = cols;
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0 || cols % 8 != 0) return cudaErrorInvalidValue;
  p.trigger_first = rows <= kTriggerFirstMaxRows;
  const int lane_chunks = (cols / 8 + 31) / 32;  // chunks per lane, one warp per row
  if (lane_chunks <= 1) return launch_quantize_warp<1>(p, rows, stream);
  if (lane_chunks <= 2) return launch_quantize_warp<2>(p, rows, stream);
  if (lane_chunks <= 4) return launch_quantize_warp<4>(p, rows, stream);
  if (lane_chunks <= 8) return launch_quantize_warp<8>(p, rows, stream);
  if (lane_chunks <= 16) return launch_quantize_warp<16>(p, rows, stream);
  return launch_row<RowOp::kQuantize>(p, rows, stream);  // wider rows: a block per row
}

cudaError_t embedding_gather(const uint16_t* table, int64_t vocab, const int32_t* ids, int rows, int cols,
                             uint16_t* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (cols % 8 != 0) return cudaErrorInvalidValue;
  return launch_kernel(gather_kernel, dim3(rows), dim3(256), 0, stream, reinterpret_cast<const uint4*>(table), vocab, ids,
                       cols / 8, reinterpret_cast<uint4*>(out));
}

cudaError_t copy_bytes(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes % 16 != 0) return cudaErrorInvalidValue;
  copy_kernel<<<132 * 16, 256, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16);
  return cudaGetLastError();
}

}  // namespace qserve::cuda
