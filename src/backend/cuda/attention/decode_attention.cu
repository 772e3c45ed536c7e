// Decode attention: the split heuristic, the launch of one of the kernels,
// the exact merge of the splits (flash-decoding, merge_splits.h) and the
// per-token quantization of the output when asked.
//  - kMma (decode_mma_kernel.cuh): tensor cores with the keys in M and the
//    group's heads in N, every group 1..8;
//  - kSimt (decode_simt_kernel.cuh): CUDA cores, groups 1-2;
//  - kMmaRows (paged_attention_kernel.cuh, decode mode): tensor cores with the
//    heads in M, groups 3-8 (the first kernel; kept for comparison).
// kAuto's choice is in choose_kernel (measured: bench/results/).
#include "backend/cuda/attention/decode_attention.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "backend/cuda/attention/decode_mma_kernel.cuh"
#include "backend/cuda/attention/decode_simt_kernel.cuh"
#include "backend/cuda/attention/merge_splits.h"
#include "backend/cuda/kernels/fused_ops.h"
#include "backend/cuda/launch_pdl.cuh"
#include "backend/cuda/attention/paged_attention_kernel.cuh"
#include "backend/cuda/tensor_map.h"

namespace qserve::cuda {

namespace {

using attn::kChunk;
// The KV4 d = 128 decode stages by TMA from this many keys per unit (split),
// when the units fit in one wave of resident blocks (MmaTraits::kBlocksPerSm).
constexpr int kTmaMinUnitTokens = 3072;
// Units side by side (DecodePlan::unit_warps) while each warp streams at
// most this many keys of its unit (KV4 / KV8; FP16 pages 256), where that
// makes fewer waves.
constexpr int kSidesMaxWarpTokens = 512;

template <KvDtype DT, int D, int GP>
cudaError_t launch_decode(const attn::Params& p, int batch, cudaStream_t stream) {
  constexpr int kSmem = attn::smem_bytes<DT, D, GP, attn::Mode::kDecode>();
  auto kernel = attn::paged_attention_kernel<DT, D, GP, attn::Mode::kDecode>;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(p.num_kv_heads, batch, p.num_splits);
  kernel<<<grid, attn::kThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

template <KvDtype DT, int D, int G>
cudaError_t launch_simt(const attn::Params& p, int batch, cudaStream_t stream) {
  constexpr int kSmem = simt::smem_bytes<DT, D, G>();
  auto kernel = simt::decode_simt_kernel<DT, D, G>;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(p.num_kv_heads, batch, p.num_splits);
  kernel<<<grid, attn::kThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

// Resident blocks per SM of the keys-in-M kernel (its shared memory set up
// first; 0 if the attribute or the query fails).
template <KvDtype DT, int D, bool kSubV, bool kTma = false, int kUW = attn::kWarps>
int mma_blocks_per_sm() {
  static const int n = [] {
    constexpr int kSmem = mmat::smem_bytes<DT, D, kTma>();
    auto kernel = mmat::decode_mma_kernel<DT, D, kSubV, kTma, kUW>;
    int blocks = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, attn::kThreads, kSmem) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return blocks;
  }();
  return n;
}

// The K and V pools of a KV4, D = 128 cache as the decode kernel's TMA reads
// them (kTma): 2-D tensors of 64-byte rows (a token's codes of one head),
// box [kWK rows][64 B] in the 64-byte swizzle. false where the cache does not
// fit that form (pages of a multiple of kWK tokens, every region on a 64-byte
// row, rows countable in int32), the device is not sm_90, or the driver
// refuses: the caller then stages by cp.async.
struct KvMaps {
  CUtensorMap k{}, v{};
};
bool make_kv4_maps(const PagedKvCache& cache, KvMaps& maps) {
  using T = mmat::MmaTraits<KvDtype::kInt4, 128>;
  const KvPageLayout& L = cache.layout;
  if (L.dtype != KvDtype::kInt4 || L.head_dim != 128 || L.page_size % T::kWK != 0 ||
      L.head_block_bytes() % 64 != 0 || L.values_region_bytes() % 16 != 0 || cache.num_pages <= 0 || device_major() != 9)
    return false;
  const int64_t rows = static_cast<int64_t>(cache.num_pages) * L.page_bytes() / 64;
  if (rows >= (int64_t{1} << 31) || reinterpret_cast<uintptr_t>(cache.k_pages) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(cache.v_pages) % 16 != 0)
    return false;
  const cuuint64_t dims[2] = {64, static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {64};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(T::kWK)};
  const cuuint32_t elem_strides[2] = {1, 1};
  auto encode = [&](CUtensorMap& map, uint8_t* base) {
    return tensor_map_encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, base, dims, strides, box, elem_strides,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  };
  return encode(maps.k, cache.k_pages) && encode(maps.v, cache.v_pages);
}

// make_kv4_maps once per cache: a decode step launches the kernel once per
// layer, each layer over its own pools, and the encoding is host work
// (microseconds) that eager steps would repeat. A map depends only on the
// pools' addresses, page count and layout, so an entry stays right even if
// its pools are freed and others take their place.
bool kv4_maps(const PagedKvCache& cache, KvMaps& maps) {
  struct Entry {
    PagedKvCache cache;
    bool ok;
    KvMaps maps;
  };
  static std::mutex mutex;
  static std::vector<Entry> entries;
  std::lock_guard<std::mutex> lock(mutex);
  for (const Entry& e : entries)
    if (e.cache == cache) {
      maps = e.maps;
      return e.ok;
    }
  if (entries.size() >= 512) entries.clear();  // (pools reallocated many times over)
  Entry e{cache, false, {}};
  e.ok = make_kv4_maps(cache, e.maps);
  entries.push_back(e);
  maps = e.maps;
  return e.ok;
}

template <KvDtype DT, int D, bool kSubV, bool kTma = false, int kUW = attn::kWarps>
cudaError_t launch_mma(const attn::Params& p, int batch, int num_sms, bool persistent, cudaStream_t stream,
                       const KvMaps& maps = {}) {
  constexpr int kSmem = mmat::smem_bytes<DT, D, kTma>();
  auto kernel = mmat::decode_mma_kernel<DT, D, kSubV, kTma, kUW>;
  const int per_sm = mma_blocks_per_sm<DT, D, kSubV, kTma, kUW>();
  if (per_sm == 0) return cudaErrorInvalidValue;
  // one block per unit (sequence, KV head, split), one per 4 / kUW units
  // side by side, or a persistent grid of the resident blocks (at most
  // kMaxUnits units each; the merge of a block's other units needs group <= 4)
  const int64_t units = static_cast<int64_t>(p.num_kv_heads) * batch * p.num_splits;
  constexpr int kSide = attn::kWarps / kUW;
  int64_t blocks = (units + kSide - 1) / kSide;
  if (kSide == 1 && persistent && p.group <= 4 && num_sms > 0) {
    // as many units per block as the resident blocks need, spread evenly
    // (1024 units on 528 slots: 512 blocks of 2, not 528 of which 32 idle
    // half the time)
    const int64_t slots = static_cast<int64_t>(per_sm) * num_sms;
    const int64_t per_block = std::min<int64_t>((units + slots - 1) / slots, mmat::kMaxUnits);
    blocks = (units + per_block - 1) / per_block;
  }
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  // programmatic dependent launch (launch_pdl.h): the kernel waits before it
  // reads what the previous kernel may write
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(attn::kThreads), kSmem, stream, p, maps.k,
                       maps.v);
}

// The cp.async kernel with DecodePlan::unit_warps warps per unit (the value
// path that serves each format by default; the others, and the persistent
// grid, one unit per block at a time).
template <KvDtype DT, int D, bool kSubV>
cudaError_t launch_mma_units(const attn::Params& p, int batch, const DecodePlan& plan, cudaStream_t stream) {
  if constexpr (kSubV == kv_has_params(DT)) {
    if (!plan.persistent && plan.unit_warps == 2)
      return launch_mma<DT, D, kSubV, false, 2>(p, batch, plan.num_sms, false, stream);
    if (!plan.persistent && plan.unit_warps == 1)
      return launch_mma<DT, D, kSubV, false, 1>(p, batch, plan.num_sms, false, stream);
  }
  return launch_mma<DT, D, kSubV>(p, batch, plan.num_sms, plan.persistent, stream);
}

// kAuto: the keys-in-M tensor-core kernel for every group.
DecodeKernel choose_kernel(DecodeKernel asked, int group) {
  if (asked == DecodeKernel::kSimt && group <= 2) return asked;
  if (asked == DecodeKernel::kMmaRows && group >= 3) return asked;
  return DecodeKernel::kMma;
}

template <KvDtype DT, int D>
cudaError_t dispatch_group(const attn::Params& p, int batch, const DecodePlan& plan, const PagedKvCache& cache,
                           cudaStream_t stream) {
  const DecodeKernel kernel = plan.kernel;
  if (p.group < 1 || p.group > 8) return cudaErrorInvalidValue;
  switch (choose_kernel(kernel, p.group)) {
    case DecodeKernel::kSimt:
      return p.group == 1 ? launch_simt<DT, D, 1>(p, batch, stream) : launch_simt<DT, D, 2>(p, batch, stream);
    case DecodeKernel::kMmaRows:
      return p.group <= 4 ? launch_decode<DT, D, 4>(p, batch, stream) : launch_decode<DT, D, 8>(p, batch, stream);
    default:
      if constexpr (mmat::MmaTraits<DT, D>::kTmaOk) {
        KvMaps maps;
        if (plan.tma && plan.subnormal_values && kv4_maps(cache, maps))
          return launch_mma<DT, D, true, true>(p, batch, plan.num_sms, plan.persistent, stream, maps);
      }
      if constexpr (kv_has_params(DT)) {
        if (plan.subnormal_values) return launch_mma_units<DT, D, true>(p, batch, plan, stream);
      }
      return launch_mma_units<DT, D, false>(p, batch, plan, stream);
  }
}

template <KvDtype DT>
cudaError_t dispatch_head_dim(const attn::Params& p, int head_dim, int batch, const DecodePlan& plan,
                              const PagedKvCache& cache, cudaStream_t stream) {
  if (head_dim == 64) return dispatch_group<DT, 64>(p, batch, plan, cache, stream);
  if (head_dim == 128) return dispatch_group<DT, 128>(p, batch, plan, cache, stream);
  return cudaErrorInvalidValue;
}

// Resident blocks per SM of the keys-in-M kernel for the format, as built
// (its launch bounds; the same for both head dims).
int mma_traits_blocks_per_sm(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kInt4: return mmat::MmaTraits<KvDtype::kInt4, 128>::kBlocksPerSm;
    case KvDtype::kInt8: return mmat::MmaTraits<KvDtype::kInt8, 128>::kBlocksPerSm;
    default: return mmat::MmaTraits<KvDtype::kFp16, 128>::kBlocksPerSm;
  }
}

}  // namespace

int decode_blocks_per_sm(KvDtype dtype, int head_dim) {
  const bool d128 = head_dim == 128;
  if (!d128 && head_dim != 64) return 0;
  switch (dtype) {
    case KvDtype::kInt4:
      return d128 ? mma_blocks_per_sm<KvDtype::kInt4, 128, true>() : mma_blocks_per_sm<KvDtype::kInt4, 64, true>();
    case KvDtype::kInt8:
      return d128 ? mma_blocks_per_sm<KvDtype::kInt8, 128, true>() : mma_blocks_per_sm<KvDtype::kInt8, 64, true>();
    case KvDtype::kFp16:
      return d128 ? mma_blocks_per_sm<KvDtype::kFp16, 128, false>() : mma_blocks_per_sm<KvDtype::kFp16, 64, false>();
    default: return 0;
  }
}

DecodePlan plan_decode_attention(const AttentionShape& shape, KvDtype dtype, int batch, int max_context, int num_sms,
                                 int force_splits) {
  DecodePlan plan;
  plan.num_sms = num_sms;
  const int max_chunks = std::max(1, (max_context + kChunk - 1) / kChunk);
  const int work = std::max(1, batch * shape.num_kv_heads);
  const int target = num_sms * 3;  // about the number of resident blocks
  int splits = force_splits > 0 ? force_splits : (work >= target ? 1 : (target + work - 1) / work);
  splits = std::clamp(splits, 1, max_chunks);
  const int chunks_per_split = (max_chunks + splits - 1) / splits;
  plan.split_tokens = chunks_per_split * kChunk;
  plan.num_splits = (max_chunks + chunks_per_split - 1) / chunks_per_split;
  if (plan.num_splits > 1)
    plan.workspace_bytes = static_cast<size_t>(batch) * shape.num_q_heads * plan.num_splits * (shape.head_dim + 2) * 4;
  // TMA staging where the units are long (each warp streams many warp-chunks)
  // and fit in one wave of resident blocks: 1-10 % faster than cp.async there
  // in every way it was timed; 0-5 % slower at 1,024-2,048 keys per unit, and
  // at several waves of long units faster in some runs, slower in others
  // (bench/results/2026-12-01-attention-h200-r10.md)
  const int64_t units = static_cast<int64_t>(work) * plan.num_splits;
  const int64_t slots = static_cast<int64_t>(std::max(1, num_sms)) * mma_traits_blocks_per_sm(dtype);
  plan.tma = dtype == KvDtype::kInt4 && shape.head_dim == 128 && plan.split_tokens >= kTmaMinUnitTokens &&
             units <= slots;
  // Units side by side where one unit per block takes more waves of resident
  // blocks: the fewest waves, ties to more warps per unit. Each wave pays the
  // launch and the block's fixed chain (1.1-1.6x faster at 256-512 keys per
  // unit), but fewer waves give up the dynamic balance of many over the SMs
  // (0.96-1.02x where a warp streams 1,024 keys, 0.97x at 1,536), so the
  // warps' share of a unit is capped: bench/results/2026-12-02-attention-h200-r11.md.
  const int max_warp_tokens = dtype == KvDtype::kFp16 ? kSidesMaxWarpTokens / 2 : kSidesMaxWarpTokens;
  plan.unit_warps = plan.tma ? attn::kWarps : decode_unit_warps(units, slots, plan.split_tokens, max_warp_tokens);
  return plan;
}

int decode_unit_warps(int64_t units, int64_t slots, int split_tokens, int max_warp_tokens) {
  auto waves = [&](int unit_warps) {
    const int64_t blocks = (units * unit_warps + attn::kWarps - 1) / attn::kWarps;
    return (blocks + slots - 1) / std::max<int64_t>(1, slots);
  };
  int best = attn::kWarps;
  for (int w : {2, 1})
    if (split_tokens <= static_cast<int64_t>(max_warp_tokens) * w && waves(w) < waves(best))  // split_tokens / w a warp
      best = w;
  return best;
}

cudaError_t decode_attention(const DecodeArgs& args, const AttentionShape& shape, const PagedKvCache& cache,
                             const DecodePlan& plan, void* workspace, cudaStream_t stream) {
  if (args.batch <= 0) return cudaSuccess;
  if (shape.num_kv_heads <= 0 || shape.num_q_heads % shape.num_kv_heads != 0 ||
      cache.layout.head_dim != shape.head_dim || cache.layout.num_kv_heads != shape.num_kv_heads ||
      plan.split_tokens % kChunk != 0 || plan.split_tokens <= 0 || (plan.num_splits > 1 && workspace == nullptr))
    return cudaErrorInvalidValue;
  if (args.quant.q != nullptr && (reinterpret_cast<uintptr_t>(args.out) % 16 != 0 || args.quant.scale == nullptr))
    return cudaErrorInvalidValue;  // quantized rows are read and written in 16-byte words
  attn::Params p = attn::make_params(args.q, args.out, cache, args.context_lens, args.page_table,
                                     args.page_table_stride, shape.num_q_heads, args.softmax_scale);
  p.split_tokens = plan.split_tokens;
  p.num_splits = plan.num_splits;
  p.stage_before_wait = plan.stage_before_wait ? 1 : 0;
  p.batch = args.batch;
  if (plan.num_splits > 1) {
    p.part_o = static_cast<float*>(workspace);
    p.part_ml = p.part_o + static_cast<size_t>(args.batch) * shape.num_q_heads * plan.num_splits * shape.head_dim;
  }
  cudaError_t st;
  switch (cache.layout.dtype) {
    case KvDtype::kInt4: st = dispatch_head_dim<KvDtype::kInt4>(p, shape.head_dim, args.batch, plan, cache, stream); break;
    case KvDtype::kInt8: st = dispatch_head_dim<KvDtype::kInt8>(p, shape.head_dim, args.batch, plan, cache, stream); break;
    case KvDtype::kFp16: st = dispatch_head_dim<KvDtype::kFp16>(p, shape.head_dim, args.batch, plan, cache, stream); break;
    default: return cudaErrorInvalidValue;
  }
  if (st != cudaSuccess) return st;
  const bool quantize = args.quant.q != nullptr;
  if (plan.num_splits > 1) {
    const SplitPartials parts{p.part_o, p.part_ml, args.batch, shape.num_q_heads, shape.head_dim, plan.num_splits};
    if (quantize) {
      // one launch: merge and quantize (or, where it is not supported, the two below)
      st = merge_splits_quantize(parts, args.out, args.quant, stream);
      if (st != cudaErrorNotSupported) return st;
    }
    st = merge_splits(parts, args.out, stream);
    if (st != cudaSuccess) return st;
  }
  if (!quantize) return cudaSuccess;
  return quantize_int8(args.out, args.batch, shape.num_q_heads * shape.head_dim, args.quant, stream);
}

}  // namespace qserve::cuda
