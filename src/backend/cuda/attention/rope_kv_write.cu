// Blocks (token, group of kWarpsPerBlock heads), one warp per head (q, k, v
// heads in turn): a decode step's single token spreads over (Hq + 2 Hkv) / 8
// blocks instead of one block walking every head (Llama-3-8B: 6 blocks, one
// head per warp, instead of 6 heads in turn per warp). A lane
// rotates D/64 pairs; for k and v the rotated fp16 head goes through shared
// memory so that each lane then owns D/32 consecutive elements: min/max by
// warp shuffles, then the lane packs and stores its codes (coalesced).
//
// Launched with programmatic dependent launch (launch_pdl.h): it waits for
// the previous kernel (the QKV projection) before its first global access and
// lets the next kernel be scheduled right after, so that decode attention
// stages the old keys of its first chunks while this kernel writes the new
// token (decode reads nothing that this kernel writes before its own wait:
// the contract in decode_attention.h).
#include "backend/cuda/attention/rope_kv_write.h"

#include <cuda_fp16.h>

#include "backend/cuda/attention/cuda_utils.cuh"
#include "backend/cuda/launch_pdl.cuh"

namespace qserve::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

struct RopeKvParams {
  QkvInput in;
  KvWriteBatch batch;
  int32_t num_q_heads, num_kv_heads;
  RopeStyle style;
  const float* rope_table;
  half* q_out;
  PagedKvCache cache;
};

__device__ __forceinline__ float round_half_dev(float v) { return __half2float(__float2half_rn(v)); }

template <int D>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) rope_kv_write_kernel(const RopeKvParams p) {
  __shared__ half buf[kWarpsPerBlock][D];
  pdl_wait_and_trigger();  // launch_pdl.cuh: the QKV projection's output is visible from here
  const int t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hq = p.num_q_heads, hkv = p.num_kv_heads;
  const int pos = p.batch.positions[t];
  const int slot = p.batch.slot_mapping[t];
  const float* cs = p.rope_table + static_cast<int64_t>(pos) * D;
  const KvPageLayout layout = p.cache.layout;
  constexpr int kE = D / 32;  // elements per lane when quantizing

  const int first = blockIdx.y * kWarpsPerBlock, end = min(hq + 2 * hkv, first + kWarpsPerBlock);
  for (int head = first + warp; head < end; head += kWarpsPerBlock) {  // at most once: this block's head of the warp
    const int kind = head < hq ? 0 : head < hq + hkv ? 1 : 2;  // q, k, v
    if (kind != 0 && slot < 0) continue;
    const int hh = kind == 0 ? head : kind == 1 ? head - hq : head - hq - hkv;
    const uint16_t* src = kind == 0 ? p.in.q + t * p.in.q_stride
                          : kind == 1 ? p.in.k + t * p.in.k_stride
                                      : p.in.v + t * p.in.v_stride;
    const uint16_t* bias = kind == 0 ? p.in.q_bias : kind == 1 ? p.in.k_bias : p.in.v_bias;
    src += hh * D;
    if (bias) bias += hh * D;
#pragma unroll
    for (int j = 0; j < D / 64; ++j) {
      const int i = lane + 32 * j;
      int a, b;
      rope_pair(p.style, D, i, a, b);
      float xa = __half2float(__ushort_as_half(src[a])), xb = __half2float(__ushort_as_half(src[b]));
      if (bias) {
        xa = kv_add_rn(xa, __half2float(__ushort_as_half(bias[a])));
        xb = kv_add_rn(xb, __half2float(__ushort_as_half(bias[b])));
      }
      if (kind != 2) {
        float ya, yb;
        rope_rotate(xa, xb, cs[2 * i], cs[2 * i + 1], ya, yb);
        xa = ya;
        xb = yb;
      }
      const half ha = __float2half_rn(xa), hb = __float2half_rn(xb);
      if (kind == 0) {
        half* dst = p.q_out + (static_cast<int64_t>(t) * hq + hh) * D;
        dst[a] = ha;
        dst[b] = hb;
      } else {
        buf[warp][a] = ha;
        buf[warp][b] = hb;
      }
    }
    if (kind == 0) continue;
    __syncwarp();
    float x[kE];
#pragma unroll
    for (int k = 0; k < kE; ++k) x[k] = __half2float(buf[warp][lane * kE + k]);
    uint8_t* page = (kind == 2 ? p.cache.v_pages : p.cache.k_pages) +
                    static_cast<int64_t>(slot / layout.page_size) * layout.page_bytes();
    const int s = slot % layout.page_size;
    uint8_t* values = page + layout.value_offset(hh, s);
    if (layout.dtype == KvDtype::kFp16) {
#pragma unroll
      for (int k = 0; k < kE; ++k) reinterpret_cast<half*>(values)[lane * kE + k] = buf[warp][lane * kE + k];
    } else {
      float mn = x[0], mx = x[0];
#pragma unroll
      for (int k = 1; k < kE; ++k) mn = fminf(mn, x[k]), mx = fmaxf(mx, x[k]);
      mn = warp_min(mn);
      mx = warp_max(mx);
      float scale, zero;
      kv_token_params_from_range(mn, mx, layout.dtype, [](float v) { return round_half_dev(v); }, scale, zero);
      int c[kE];
#pragma unroll
      for (int k = 0; k < kE; ++k) c[k] = kv_quantize_value(x[k], scale, zero, layout.dtype);
      if (layout.dtype == KvDtype::kInt4) {
#pragma unroll
        for (int k = 0; k < kE; k += 2) values[(lane * kE + k) / 2] = static_cast<uint8_t>(c[k] | (c[k + 1] << 4));
      } else {
#pragma unroll
        for (int k = 0; k < kE; ++k) values[lane * kE + k] = static_cast<uint8_t>(c[k]);
      }
      if (lane == 0)
        *reinterpret_cast<half2*>(page + layout.scale_offset(hh, s)) =
            __halves2half2(__float2half_rn(scale), __float2half_rn(zero));
    }
    __syncwarp();
  }
}

}  // namespace

cudaError_t rope_kv_write(const QkvInput& in, const KvWriteBatch& batch, const AttentionShape& shape, RopeStyle style,
                          const float* rope_table, uint16_t* q_out, const PagedKvCache& cache, cudaStream_t stream) {
  if (batch.num_tokens <= 0) return cudaSuccess;
  if (shape.num_kv_heads <= 0 || cache.layout.head_dim != shape.head_dim ||
      cache.layout.num_kv_heads != shape.num_kv_heads)
    return cudaErrorInvalidValue;
  const RopeKvParams p{in, batch, shape.num_q_heads, shape.num_kv_heads, style, rope_table,
                       reinterpret_cast<half*>(q_out), cache};
  const int head_groups = (shape.num_q_heads + 2 * shape.num_kv_heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (head_groups > 65535) return cudaErrorInvalidValue;
  const dim3 grid(batch.num_tokens, head_groups), block(kWarpsPerBlock * 32);
  if (shape.head_dim == 64) return launch_kernel(rope_kv_write_kernel<64>, grid, block, 0, stream, p);
  if (shape.head_dim == 128) return launch_kernel(rope_kv_write_kernel<128>, grid, block, 0, stream, p);
  return cudaErrorInvalidValue;
}

}  // namespace qserve::cuda
