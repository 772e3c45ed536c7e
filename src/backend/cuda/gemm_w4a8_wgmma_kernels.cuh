// The launchers of the sm_90a W4A8 tiles by family (W4, INT8-weight s8,
// producer-dequantizing pd, W4 with split-K in a cluster, the large W4 tiles
// with stream-K, the decode tiles with stream-K, the 160-224-token tiles, the multicast pairs, the cluster tiles' push forms) and kind (g128, per-channel): each family x kind
// is instantiated in its own gemm_w4a8_wgmma_*.cu, so that they compile in
// parallel; gemm_w4a8_wgmma_launch.cu calls them.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "backend/cuda/launch_pdl.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_kernel.cuh"

namespace qserve::cuda::w4a8::wgmma {

namespace detail {
// The instantiation of tile kTile (index into kTiles); kUN: a cluster tile's
// unsplit twin, kPR: its push form of kPR splits (2: the pair form;
// kernels/gemm_w4a8_wgmma_kernel.cuh).
// kStages: the pipeline's depth (the tile's, or one fewer: has_push_fewer_form).
template <int kTile, bool kG128, bool kSK, bool kUN = false, int kPR = 0, int kStages = kTiles[kTile].stages>
inline constexpr auto kKernel =
    &gemm_w4a8_wgmma_kernel<kTiles[kTile].bm, kTiles[kTile].mt, kStages, kG128, kTiles[kTile].acc_sets,
                            kTiles[kTile].s8, kTiles[kTile].pd, kTiles[kTile].cluster, kTiles[kTile].kd, kSK,
                            kTiles[kTile].mc, kTiles[kTile].occ, kUN, kPR, kTiles[kTile].bn64>;
// The shape tile kTile's kernels of one kind lay out (per-channel: no level-2 region).
template <int kTile, bool kG128>
inline constexpr TileShape kShapeOf = kind_shape(kTiles[kTile], kG128);

// Raises kernel K's dynamic shared-memory limit to `smem`, once (its first launch).
template <auto K>
void allow_smem_once(int smem) {
  static const bool done = [smem] {
    QS_CUDA_CHECK(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)done;
}

// Launches tile kTile's push form of kWays splits, at the tile's depth or
// (kFewer) one stage fewer, with the received parts apart from the stages or
// in them.
template <int kTile, bool kG128, int kWays, bool kFewer>
void launch_push_instance(bool apart, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                          cudaStream_t stream, bool pdl) {
  constexpr TileShape s = kFewer ? one_stage_fewer(kShapeOf<kTile, kG128>) : kShapeOf<kTile, kG128>;
  constexpr auto kernel = kKernel<kTile, kG128, false, false, kWays, s.stages>;
  allow_smem_once<kernel>(push_smem_bytes(s, kWays));
  Params pp = p;
  pp.push_recv_apart = apart;
  pp.push_async = push_async();
  launch_clustered(kernel, dim3(ctas), dim3(kThreads), apart ? push_smem_bytes(s, kWays) : smem_bytes(s), stream, pdl,
                   kWays, x_map, w_map, pp);
}
// Tile kTile's push form of kWays splits (a cluster of kWays CTAs a tile; 2:
// the pair form), if the tile has one (has_push_form) and p.splits is kWays:
// whether it was launched. Its received parts go apart from the stages where
// they fit and that is switched on; where they fit only with a stage fewer,
// that form runs (has_push_fewer_form, where switched on).
template <int kTile, bool kG128, int kWays>
bool launch_push_form(const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                      cudaStream_t stream, bool pdl) {
  constexpr TileShape s = kShapeOf<kTile, kG128>;
  if constexpr (has_push_form(s, kWays)) {
    if (p.splits != kWays) return false;
    if constexpr (has_push_fewer_form(s, kWays))
      if (push_fewer_stages() && push_apart()) {
        launch_push_instance<kTile, kG128, kWays, true>(true, x_map, w_map, p, ctas, stream, pdl);
        return true;
      }
    launch_push_instance<kTile, kG128, kWays, false>(push_recv_apart(s, kWays) && push_apart(), x_map, w_map, p,
                                                     ctas, stream, pdl);
    return true;
  }
  return false;
}
// Tile kTile's push form of p.splits among W... (PushWays): whether one was launched.
template <int kTile, bool kG128, int... W>
bool launch_push_tile(const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                      cudaStream_t stream, bool pdl, std::integer_sequence<int, W...>) {
  return (launch_push_form<kTile, kG128, W>(x_map, w_map, p, ctas, stream, pdl) || ...);
}
template <bool kG128, int... I>
bool launch_push_in(int tile, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl, std::integer_sequence<int, I...>) {
  bool launched = false;
  ((tile == kFirstClusterTile + I &&
    (launched = launch_push_tile<kFirstClusterTile + I, kG128>(x_map, w_map, p, ctas, stream, pdl, PushWays{}),
     true)) ||
   ...);
  return launched;
}
}  // namespace detail

// The cluster tiles' push forms of 3, 4 or 6 splits (instantiated in
// gemm_w4a8_wgmma_clp_{g128,pc}.cu): whether tile `tile` has one for
// p.splits and it was launched.
template <bool kG128>
bool launch_kind_cl_push(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream,
                         bool pdl) {
  return detail::launch_push_in<kG128>(tile, x_map, x_map, p, ctas, stream, pdl,
                                       std::make_integer_sequence<int, kEndClusterTile - kFirstClusterTile>{});
}
extern template bool launch_kind_cl_push<true>(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
extern template bool launch_kind_cl_push<false>(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);

namespace detail {
// w_map: the INT8 weights' tensor map (s8 tiles; the W4 and pd tiles ignore it).
// kSK: the tile's stream-K instantiation (p.stream_k).
template <int kTile, bool kG128, bool kSK = false>
void launch(const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas, cudaStream_t stream,
            bool pdl) {
  constexpr TileShape s = kShapeOf<kTile, kG128>;
  constexpr auto kernel = kKernel<kTile, kG128, kSK>;
  if (static_cast<bool>(p.stream_k) != kSK) QS_CUDA_CHECK(cudaErrorInvalidValue);
  constexpr int smem = smem_bytes(s);
  if constexpr (s.cluster) {
    // One CTA per unit; the p.splits CTAs of one output tile form a cluster.
    if (ctas != p.units || p.splits < 1 || p.splits > kMaxClusterSplits) QS_CUDA_CHECK(cudaErrorInvalidValue);
    if (p.splits == 1 && unsplit_twins()) {
      // Unsplit: the tile's twin (kUN), launched without a cluster, with the
      // staged epilogue in its stages instead of the cluster's.
      constexpr auto twin = kKernel<kTile, kG128, kSK, true>;
      allow_smem_once<twin>(smem);
      launch_maybe_pdl(twin, dim3(ctas), dim3(kThreads), smem, stream, pdl, x_map, w_map, p);
      return;
    }
    // Two splits: the pair form, halves exchanged by distributed shared-memory
    // stores; 3, 4 or 6: the push form (in its own objects), where switched on.
    if (cluster_pair() && launch_push_form<kTile, kG128, 2>(x_map, w_map, p, ctas, stream, pdl)) return;
    if (p.splits > 2 && cluster_push() && launch_kind_cl_push<kG128>(kTile, x_map, p, ctas, stream, pdl)) return;
    allow_smem_once<kernel>(smem);
    launch_clustered(kernel, dim3(ctas), dim3(kThreads), smem, stream, pdl, p.splits, x_map, w_map, p);
    return;
  }
  allow_smem_once<kernel>(smem);
  if constexpr (s.mc) {
    // Pairs of CTAs; at most as many clusters as are resident at once (the
    // GPCs' SM counts may leave an SM without a partner), so that every
    // cluster runs from the start (the units are strided over the clusters).
    static const int max_clusters = [&] {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(2 * 1024);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = 2;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int count = 0;
      QS_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&count, kernel, &cfg));
      return count;
    }();
    if (ctas < 2 || ctas % 2 != 0 || max_clusters < 1) QS_CUDA_CHECK(cudaErrorInvalidValue);
    const int clusters = std::min(ctas / 2, max_clusters);
    launch_clustered(kernel, dim3(2 * clusters), dim3(kThreads), smem, stream, pdl, 2, x_map, w_map, p);
  } else {
    launch_maybe_pdl(kernel, dim3(ctas), dim3(kThreads), smem, stream, pdl, x_map, w_map, p);
  }
}

// Launches tile `tile` of the family [kBegin, kBegin + sizeof...(I)): one
// kernel instantiation per tile of the range; a tile outside it is
// cudaErrorInvalidValue.
template <bool kG128, bool kSK, int kBegin, int... I>
void launch_in(int tile, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
               cudaStream_t stream, bool pdl, std::integer_sequence<int, I...>) {
  const bool launched =
      ((tile == kBegin + I && (launch<kBegin + I, kG128, kSK>(x_map, w_map, p, ctas, stream, pdl), true)) || ...);
  if (!launched) QS_CUDA_CHECK(cudaErrorInvalidValue);
}
template <bool kG128, int kBegin, int kEnd, bool kSK = false>
void launch_range(int tile, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                  cudaStream_t stream, bool pdl) {
  launch_in<kG128, kSK, kBegin>(tile, x_map, w_map, p, ctas, stream, pdl,
                                std::make_integer_sequence<int, kEnd - kBegin>{});
}
}  // namespace detail

// The eight families of one kind; each is instantiated in its own file
// (gemm_w4a8_wgmma_{g128,pc,s8_g128,s8_pc,pd_g128,pd_pc,cl_g128,cl_pc,sk_g128,sk_pc,skd_g128,skd_pc,mid_g128,mid_pc,mc_g128,mc_pc}.cu),
// so that they compile in parallel, and nowhere else (the extern declarations below).
// y_map: the TMA epilogue's output map (tiles tma_epilogue, Params::y_tma), passed as the kernel's second map.
template <bool kG128>
void launch_kind(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                 cudaStream_t stream, bool pdl) {
  detail::launch_range<kG128, 0, kFirstS8Tile>(tile, x_map, y_map, p, ctas, stream, pdl);
}
template <bool kG128>
void launch_kind_s8(int tile, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl) {
  detail::launch_range<kG128, kFirstS8Tile, kFirstPdTile>(tile, x_map, w_map, p, ctas, stream, pdl);
}
template <bool kG128>
void launch_kind_pd(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl) {
  detail::launch_range<kG128, kFirstPdTile, kFirstClusterTile>(tile, x_map, x_map, p, ctas, stream, pdl);
}
template <bool kG128>
void launch_kind_cl(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl) {
  detail::launch_range<kG128, kFirstClusterTile, kEndClusterTile>(tile, x_map, x_map, p, ctas, stream, pdl);
}
// The persistent W4 tiles of 160-224 tokens.
template <bool kG128>
void launch_kind_mid(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                     cudaStream_t stream, bool pdl) {
  detail::launch_range<kG128, kFirstMidTile, kEndMidTile>(tile, x_map, y_map, p, ctas, stream, pdl);
}
// The multicast pairs (x_map's box: half the tile's token rows).
template <bool kG128>
void launch_kind_mc(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl) {
  detail::launch_range<kG128, kFirstMcTile, kTileCount>(tile, x_map, y_map, p, ctas, stream, pdl);
}
// The stream-K instantiations of the large W4 tiles (4..6).
template <bool kG128>
void launch_kind_sk(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl) {
  detail::launch_range<kG128, kFirstLargeStreamKTile, kEndLargeStreamKTile, true>(tile, x_map, y_map, p, ctas,
                                                                                 stream, pdl);
}
// The stream-K instantiations of the decode tiles (0..3, 7..9).
template <bool kG128>
void launch_kind_skd(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                     cudaStream_t stream, bool pdl) {
  if (tile < kFirstLargeStreamKTile)
    detail::launch_range<kG128, kFirstStreamKTile, kFirstLargeStreamKTile, true>(tile, x_map, y_map, p, ctas, stream,
                                                                                pdl);
  else
    detail::launch_range<kG128, kEndLargeStreamKTile, kEndStreamKTile, true>(tile, x_map, y_map, p, ctas, stream,
                                                                            pdl);
}

extern template void launch_kind<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int, cudaStream_t,
                                       bool);
extern template void launch_kind<false>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int, cudaStream_t,
                                        bool);
extern template void launch_kind_s8<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                          cudaStream_t, bool);
extern template void launch_kind_s8<false>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                           cudaStream_t, bool);
extern template void launch_kind_pd<true>(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
extern template void launch_kind_pd<false>(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
extern template void launch_kind_cl<true>(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
extern template void launch_kind_cl<false>(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
extern template void launch_kind_mid<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                           cudaStream_t, bool);
extern template void launch_kind_mid<false>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                            cudaStream_t, bool);
extern template void launch_kind_mc<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                          cudaStream_t, bool);
extern template void launch_kind_mc<false>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                           cudaStream_t, bool);
extern template void launch_kind_sk<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                          cudaStream_t, bool);
extern template void launch_kind_sk<false>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                           cudaStream_t, bool);
extern template void launch_kind_skd<true>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                           cudaStream_t, bool);
extern template void launch_kind_skd<false>(int, const CUtensorMap&, const CUtensorMap&, const Params&, int,
                                            cudaStream_t, bool);

}  // namespace qserve::cuda::w4a8::wgmma
