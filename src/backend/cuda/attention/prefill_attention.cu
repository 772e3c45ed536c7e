// Prefill attention launchers:
//  - kFlash / kFlashSyncPv (prefill_flash_kernel.cuh): a block serves 128 rows = 128 / group
//    new tokens x the group's query heads of one KV head of one sequence;
//    grid.z walks the token blocks of the longest sequence from its last
//    block (the most keys) down, blocks past a shorter one's end return.
//  - kPaged (paged_attention_kernel.cuh in prefill mode): 64 rows = 64 / GP
//    new tokens x GP query heads (GP = group padded to 1, 2, 4, 8).
#include "backend/cuda/attention/prefill_attention.h"

#include "backend/cuda/attention/paged_attention_kernel.cuh"
#include "backend/cuda/attention/prefill_flash_kernel.cuh"

namespace qserve::cuda {

namespace {

template <KvDtype DT, int D, bool kPvWgmma>
cudaError_t launch_flash(const attn::Params& p, int batch, int max_new, cudaStream_t stream) {
  constexpr int kSmem = flash::Cfg<DT, D>::kSmem;
  auto kernel = flash::prefill_flash_kernel<DT, D, kPvWgmma>;
  // 2 blocks per SM: the most shared memory
  static const cudaError_t attr = [&] {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    return e != cudaSuccess ? e : cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
  }();
  if (attr != cudaSuccess) return attr;
  const int tokens_per_block = flash::kRows / p.group;
  const int blocks = (max_new + tokens_per_block - 1) / tokens_per_block;
  const dim3 grid(p.num_kv_heads, batch, blocks);
  kernel<<<grid, flash::kThreads, kSmem, stream>>>(p, blocks);
  return cudaGetLastError();
}

template <KvDtype DT, int D, int GP>
cudaError_t launch_prefill(const attn::Params& p, int batch, int max_new, cudaStream_t stream) {
  constexpr int kSmem = attn::smem_bytes<DT, D, GP, attn::Mode::kPrefill>();
  auto kernel = attn::paged_attention_kernel<DT, D, GP, attn::Mode::kPrefill>;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr != cudaSuccess) return attr;
  constexpr int kTokensPerBlock = attn::kWarps * 16 / GP;
  const dim3 grid(p.num_kv_heads, batch, (max_new + kTokensPerBlock - 1) / kTokensPerBlock);
  kernel<<<grid, attn::kThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

template <KvDtype DT, int D>
cudaError_t dispatch_group(const attn::Params& p, int batch, int max_new, PrefillKernel kernel, cudaStream_t stream) {
  if (p.group < 1 || p.group > 8) return cudaErrorInvalidValue;
  if (kernel == PrefillKernel::kFlash) return launch_flash<DT, D, true>(p, batch, max_new, stream);
  if (kernel == PrefillKernel::kFlashSyncPv) return launch_flash<DT, D, false>(p, batch, max_new, stream);
  if (p.group == 1) return launch_prefill<DT, D, 1>(p, batch, max_new, stream);
  if (p.group == 2) return launch_prefill<DT, D, 2>(p, batch, max_new, stream);
  if (p.group <= 4) return launch_prefill<DT, D, 4>(p, batch, max_new, stream);
  if (p.group <= 8) return launch_prefill<DT, D, 8>(p, batch, max_new, stream);
  return cudaErrorInvalidValue;
}

template <KvDtype DT>
cudaError_t dispatch_head_dim(const attn::Params& p, int head_dim, int batch, int max_new, PrefillKernel kernel,
                              cudaStream_t stream) {
  if (head_dim == 64) return dispatch_group<DT, 64>(p, batch, max_new, kernel, stream);
  if (head_dim == 128) return dispatch_group<DT, 128>(p, batch, max_new, kernel, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t prefill_attention(const PrefillArgs& args, const AttentionShape& shape, const PagedKvCache& cache,
                              cudaStream_t stream) {
  if (args.batch <= 0 || args.max_new_tokens <= 0) return cudaSuccess;
  if (shape.num_kv_heads <= 0 || shape.num_q_heads % shape.num_kv_heads != 0 ||
      cache.layout.head_dim != shape.head_dim || cache.layout.num_kv_heads != shape.num_kv_heads)
    return cudaErrorInvalidValue;
  attn::Params p = attn::make_params(args.q, args.out, cache, args.context_lens, args.page_table,
                                     args.page_table_stride, shape.num_q_heads, args.softmax_scale);
  p.q_starts = args.q_starts;
  p.num_splits = 1;
  const PrefillKernel kernel = args.kernel;
  switch (cache.layout.dtype) {
    case KvDtype::kInt4: return dispatch_head_dim<KvDtype::kInt4>(p, shape.head_dim, args.batch, args.max_new_tokens, kernel, stream);
    case KvDtype::kInt8: return dispatch_head_dim<KvDtype::kInt8>(p, shape.head_dim, args.batch, args.max_new_tokens, kernel, stream);
    case KvDtype::kFp16: return dispatch_head_dim<KvDtype::kFp16>(p, shape.head_dim, args.batch, args.max_new_tokens, kernel, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace qserve::cuda
