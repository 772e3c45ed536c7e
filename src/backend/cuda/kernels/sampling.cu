// One block of 1024 threads per request. Thresholds are found by bisection
// over the 32-bit order-preserving keys of the logits (the k-th largest
// logit exactly; for top-p the largest logit whose tokens at or above it hold
// top_p of the mass), then the kept tokens are scanned in index order: each
// thread owns a contiguous range, a block scan gives its offset.
#include "backend/cuda/kernels/sampling.h"

#include <cfloat>

#include "backend/cuda/attention/cuda_utils.cuh"

namespace qserve::cuda {

namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ float block_sum_f(float v, float* red) {
  v = warp_sum(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) r += red[w];
  return r;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const SamplingBatch b) {
  __shared__ float red[kThreads / 32];
  __shared__ int red_i[kThreads / 32];
  const int row = blockIdx.x;
  const float* l = b.logits + static_cast<int64_t>(row) * b.vocab;
  const SamplingParams sp = b.params[row];
  const int V = b.vocab;
  // argmax, lowest index among ties
  float best = -INFINITY;
  int best_i = 0x7fffffff;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    const float v = l[i];
    if (v > best || (v == best && i < best_i)) best = v, best_i = i;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (ov > best || (ov == best && oi < best_i)) best = ov, best_i = oi;
  }
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = best, red_i[threadIdx.x / 32] = best_i;
  __syncthreads();
  best = red[0];
  best_i = red_i[0];
  for (int w = 1; w < kThreads / 32; ++w)
    if (red[w] > best || (red[w] == best && red_i[w] < best_i)) best = red[w], best_i = red_i[w];
  if (sp.temperature <= 0.f || sp.top_k == 1) {
    if (threadIdx.x == 0) b.tokens[row] = best_i;
    return;
  }
  const float mx = best, inv_t = 1.f / sp.temperature;
  uint32_t tau_key = 0;  // keep keys >= tau_key
  if (sp.top_k > 0 && sp.top_k < V) {
    uint32_t prefix = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = prefix | (1u << bit);
      float cnt = 0.f;
      for (int i = threadIdx.x; i < V; i += kThreads) cnt += order_key(l[i]) >= cand ? 1.f : 0.f;
      if (block_sum_f(cnt, red) >= static_cast<float>(sp.top_k)) prefix = cand;
    }
    tau_key = prefix;
  }
  if (sp.top_p < 1.f) {
    float tot = 0.f;
    for (int i = threadIdx.x; i < V; i += kThreads) tot += expf((l[i] - mx) * inv_t);
    const float target = sp.top_p * block_sum_f(tot, red);
    uint32_t prefix = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = prefix | (1u << bit);
      float mass = 0.f;
      for (int i = threadIdx.x; i < V; i += kThreads) {
        const float v = l[i];
        if (order_key(v) >= cand) mass += expf((v - mx) * inv_t);
      }
      if (block_sum_f(mass, red) >= target) prefix = cand;
    }
    tau_key = max(tau_key, prefix);
  }
  // kept tokens in index order: thread t owns [t * per, (t + 1) * per)
  const int per = (V + kThreads - 1) / kThreads;
  const int lo = threadIdx.x * per, hi = min(V, lo + per);
  float mine = 0.f;
  for (int i = lo; i < hi; ++i)
    if (order_key(l[i]) >= tau_key) mine += expf((l[i] - mx) * inv_t);
  // inclusive scan of `mine` over the block
  float incl = mine;
  for (int o = 1; o < 32; o <<= 1) {
    const float v = __shfl_up_sync(0xffffffffu, incl, o);
    if (threadIdx.x % 32 >= o) incl += v;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 31) red[threadIdx.x / 32] = incl;
  __syncthreads();
  float warp_off = 0.f, kept = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < static_cast<int>(threadIdx.x / 32)) warp_off += red[w];
    kept += red[w];
  }
  const float r = sampling_uniform(sp.seed, b.steps[row]) * kept;
  float cum = warp_off + incl - mine;  // exclusive prefix
  __shared__ int chosen;
  if (threadIdx.x == 0) chosen = 0x7fffffff;
  __syncthreads();
  if (cum <= r && r < cum + mine) {
    for (int i = lo; i < hi; ++i) {
      if (order_key(l[i]) < tau_key) continue;
      cum += expf((l[i] - mx) * inv_t);
      if (cum > r) {
        atomicMin(&chosen, i);
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int t = chosen;
    if (t == 0x7fffffff) t = best_i;  // rounding left r at the very end: the most likely token
    b.tokens[row] = t;
  }
}

}  // namespace

cudaError_t sample_tokens(const SamplingBatch& batch, cudaStream_t stream) {
  if (batch.batch <= 0) return cudaSuccess;
  if (batch.vocab <= 0) return cudaErrorInvalidValue;
  sample_kernel<<<batch.batch, kThreads, 0, stream>>>(batch);
  return cudaGetLastError();
}

}  // namespace qserve::cuda
