// The merge of flash-decoding splits, alone or with o_proj's per-token INT8
// quantization fused in (merge_splits.h). Both kernels compute a merged value
// with the same instructions (merge_dims), so they give the same fp16 output;
// the fused kernel then quantizes those fp16 values with the helpers of
// kernels/row_quant.cuh, as quantize_int8 does: the same bytes.
#include "backend/cuda/attention/merge_splits.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <cmath>
#include <utility>

#include "backend/cuda/kernels/cluster_row_reduce.cuh"
#include "backend/cuda/kernels/row_quant.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda {

namespace {

// Merged values of dims [d0, d0 + N) of row r (sequence b, query head h):
// fused multiply-adds in split order, one IEEE division per value.
template <int N>
__device__ __forceinline__ void merge_dims(const SplitPartials& p, int64_t r, int d0, float (&y)[N]) {
  const int S = p.num_splits;
  const float* ml = p.part_ml + r * S * 2;
  float m_max = -INFINITY;
  for (int s = 0; s < S; ++s)
    if (ml[2 * s + 1] > 0.f) m_max = fmaxf(m_max, ml[2 * s]);
  float num[N], den = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k) num[k] = 0.f;
  for (int s = 0; s < S; ++s) {
    const float l = ml[2 * s + 1];
    if (!(l > 0.f)) continue;
    const float w = exp2f(ml[2 * s] - m_max);
    const float* o = p.part_o + (r * S + s) * p.head_dim + d0;
    if constexpr (N % 4 == 0) {
#pragma unroll
      for (int k = 0; k < N; k += 4) {
        const float4 v = *reinterpret_cast<const float4*>(o + k);
        num[k] = __fmaf_rn(w, v.x, num[k]);
        num[k + 1] = __fmaf_rn(w, v.y, num[k + 1]);
        num[k + 2] = __fmaf_rn(w, v.z, num[k + 2]);
        num[k + 3] = __fmaf_rn(w, v.w, num[k + 3]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) num[k] = __fmaf_rn(w, o[k], num[k]);
    }
    den = __fmaf_rn(w, l, den);
  }
#pragma unroll
  for (int k = 0; k < N; ++k) y[k] = den > 0.f ? __fdiv_rn(num[k], den) : 0.f;
}

// One block per (sequence, query head), one thread per dim.
__global__ void merge_splits_kernel(const SplitPartials p, half* out) {
  pdl_wait_and_trigger();  // launch_pdl.cuh
  const int64_t r = blockIdx.x;
  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float y[1];
    merge_dims<1>(p, r, d, y);
    out[r * p.head_dim + d] = __float2half_rn(y[0]);
  }
}

constexpr int kMaxCluster = 8;  // the portable cluster size

// A cluster of C blocks per token b; block `rank` merges heads [rank * hpb,
// (rank + 1) * hpb), thread t dims [8 (t % (D / 8)), + 8) of its head t / (D / 8)
// (threads past hpb * D / 8 only take part in the reductions). The row's
// absmax and, for per-channel layers, its code sum meet over the cluster
// (kernels/cluster_row_reduce.cuh); rank 0 writes the scale and sum.
template <int D>
__global__ void merge_quantize_kernel(const SplitPartials p, int heads_per_block, half* out, const Int8Rows quant) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int kChunks = D / 8;
  __shared__ uint32_t amax_of[kMaxCluster];
  __shared__ int sum_of[kMaxCluster];
  __shared__ uint32_t warp_max[32];
  __shared__ int warp_isum[32];
  cg::cluster_group cluster = cg::this_cluster();
  // Arrive now, wait before the first remote store: a block may write to
  // another's shared memory only once that block has started.
  auto started = cluster.barrier_arrive();
  pdl_wait_and_trigger();  // launch_pdl.cuh
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int64_t b = blockIdx.x / C;
  const int t = threadIdx.x;
  const bool active = t < heads_per_block * kChunks;
  const int h = rank * heads_per_block + t / kChunks, d0 = (t % kChunks) * 8;
  const int64_t r = b * p.num_q_heads + h;
  const int64_t cols = static_cast<int64_t>(p.num_q_heads) * D;
  uint4 packed = make_uint4(0, 0, 0, 0);
  if (active) {
    float y[8];
    merge_dims<8>(p, r, d0, y);
    packed = pack8(y);
    *reinterpret_cast<uint4*>(out + r * D + d0) = packed;
  }
  // the row's absmax as fp16 bits (sign cleared: their order is the values')
  const uint32_t am = cluster_row_max(cluster, std::move(started), halves_max(absmax_bits(0, packed)), warp_max,
                                      amax_of, 0u, [](uint32_t a, uint32_t c) { return max(a, c); });
  const float amax = __half2float(__ushort_as_half(static_cast<unsigned short>(am)));
  const half s_h = __float2half_rn(act_raw_scale(amax));
  const float s = __half2float(s_h);
  const RowQuant rq = row_quant(s);
  int isum = 0;
  if (active) {
    uint32_t acc = 0;
    float y[8];
    unpack8(packed, y);
    *reinterpret_cast<uint2*>(quant.q + b * cols + static_cast<int64_t>(h) * D + d0) = quantize8(y, rq, acc);
    isum = quant_sum(acc, 8);
  }
  if (quant.sum != nullptr || quant.code_sum != nullptr) {
    const int total = cluster_row_sum(cluster, isum, warp_isum, sum_of);  // |total| <= 127 x cols < 2^24: exact in f32
    if (rank == 0 && t == 0) {
      if (quant.sum) reinterpret_cast<half*>(quant.sum)[b] = __float2half_rn(__fmul_rn(s, static_cast<float>(total)));
      if (quant.code_sum) quant.code_sum[b] = total;
    }
  }
  if (rank == 0 && t == 0) reinterpret_cast<half*>(quant.scale)[b] = s_h;
#else
  __trap();  // launched only where the host found sm_90 code (merge_splits_quantize)
#endif
}

bool valid(const SplitPartials& p) {
  return p.batch >= 0 && p.num_q_heads > 0 && p.num_splits > 0 && (p.head_dim == 64 || p.head_dim == 128) &&
         p.part_o != nullptr && p.part_ml != nullptr;
}

}  // namespace

cudaError_t merge_splits(const SplitPartials& p, uint16_t* out, cudaStream_t stream) {
  if (!valid(p) || out == nullptr) return cudaErrorInvalidValue;
  if (p.batch == 0) return cudaSuccess;
  return launch_kernel(merge_splits_kernel, dim3(p.batch * p.num_q_heads), dim3(p.head_dim), 0, stream, p,
                       reinterpret_cast<half*>(out));
}

cudaError_t merge_splits_quantize(const SplitPartials& p, uint16_t* out, const Int8Rows& quant, cudaStream_t stream) {
  if (!valid(p) || out == nullptr || quant.q == nullptr || quant.scale == nullptr) return cudaErrorInvalidValue;
  if (p.batch == 0) return cudaSuccess;
  static const bool clusters = cluster_launch_supported(reinterpret_cast<const void*>(merge_quantize_kernel<128>));
  if (!clusters) return cudaErrorNotSupported;
  // the fewest heads per block that leave at most kMaxCluster blocks per token
  int hpb = 1;
  while (hpb <= p.num_q_heads && (p.num_q_heads % hpb != 0 || p.num_q_heads / hpb > kMaxCluster)) ++hpb;
  const int chunks = p.head_dim / 8;
  const int threads = (hpb * chunks + 31) / 32 * 32;
  if (threads > 1024) return cudaErrorNotSupported;
  const int C = p.num_q_heads / hpb;
  const dim3 grid(static_cast<unsigned>(p.batch) * C), block(threads);
  auto kernel = p.head_dim == 128 ? merge_quantize_kernel<128> : merge_quantize_kernel<64>;
  half* o = reinterpret_cast<half*>(out);
  if (programmatic_launch()) {
    if (detail::launch_ex(kernel, grid, block, 0, stream, true, C, p, hpb, o, quant) == cudaSuccess) return cudaSuccess;
    (void)cudaGetLastError();  // a launch-configuration error: not sticky
  }
  return detail::launch_ex(kernel, grid, block, 0, stream, false, C, p, hpb, o, quant);
}

}  // namespace qserve::cuda
