// Instantiation helper shared by gemm_w4a8_wgmma_{g128,pc}.cu (one file per
// kind so that the two compile in parallel): launches tile `tile` of one kind.
#pragma once

#include <cuda.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"
#include "backend/cuda/launch_pdl.cuh"
#include "backend/cuda/kernels/gemm_w4a8_wgmma_kernel.cuh"

namespace qserve::cuda::w4a8::wgmma {

template <bool kG128>
void launch_kind(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_pd(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_s8(int tile, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl);

namespace detail {
// w_map: the INT8 weights' tensor map (s8 tiles; the W4 tiles ignore it).
template <int kTile, bool kG128>
void launch(const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas, cudaStream_t stream,
            bool pdl) {
  constexpr TileShape s = kTiles[kTile];
  auto* kernel = &gemm_w4a8_wgmma_kernel<s.bm, s.mt, s.stages, kG128, s.acc_sets, s.s8, s.pd>;
  constexpr int smem = smem_bytes(s);
  static const bool configured = [&] {
    QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)configured;
  launch_maybe_pdl(kernel, dim3(ctas), dim3(kThreads), smem, stream, pdl, x_map, w_map, p);
}
}  // namespace detail

#define QS_WGMMA_LAUNCH_KIND(G128)                                                                          \
  template <>                                                                                               \
  void launch_kind<G128>(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, \
                         bool pdl) {                                                                      \
    static_assert(kFirstS8Tile == 10, "add the new tile to the switch");                                      \
    switch (tile) {                                                                                         \
      case 0: detail::launch<0, G128>(x_map, x_map, p, ctas, stream, pdl); break;                                      \
      case 1: detail::launch<1, G128>(x_map, x_map, p, ctas, stream, pdl); break;                                      \
      case 2: detail::launch<2, G128>(x_map, x_map, p, ctas, stream, pdl); break;                                      \
      case 3: detail::launch<3, G128>(x_map, x_map, p, ctas, stream, pdl); break;                                      \
      case 4: detail::launch<4, G128>(x_map, x_map, p, ctas, stream, pdl); break;                                      \
      case 5: detail::launch<5, G128>(x_map, x_map, p, ctas, stream, pdl); break;                                      \
      case 6: detail::launch<6, G128>(x_map, x_map, p, ctas, stream, pdl); break;\
      case 7: detail::launch<7, G128>(x_map, x_map, p, ctas, stream, pdl); break;\
      case 8: detail::launch<8, G128>(x_map, x_map, p, ctas, stream, pdl); break;\
      case 9: detail::launch<9, G128>(x_map, x_map, p, ctas, stream, pdl); break;                                      \
      default: QS_CUDA_CHECK(cudaErrorInvalidValue);                                                        \
    }                                                                                                       \
  }

#define QS_WGMMA_LAUNCH_KIND_S8(G128)                                                                        \
  template <>                                                                                                \
  void launch_kind_s8<G128>(int tile, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p,   \
                            int ctas, cudaStream_t stream, bool pdl) {                                       \
    static_assert(kFirstPdTile == 14, "add the new tile to the switch");                                    \
    switch (tile) {                                                                                          \
      case 10: detail::launch<10, G128>(x_map, w_map, p, ctas, stream, pdl); break;                          \
      case 11: detail::launch<11, G128>(x_map, w_map, p, ctas, stream, pdl); break;                          \
      case 12: detail::launch<12, G128>(x_map, w_map, p, ctas, stream, pdl); break;                          \
      case 13: detail::launch<13, G128>(x_map, w_map, p, ctas, stream, pdl); break;                          \
      default: QS_CUDA_CHECK(cudaErrorInvalidValue);                                                         \
    }                                                                                                        \
  }

#define QS_WGMMA_LAUNCH_KIND_PD(G128)                                                                        \
  template <>                                                                                                \
  void launch_kind_pd<G128>(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, \
                            bool pdl) {                                                                      \
    static_assert(kTileCount == 17, "add the new tile to the switch");                                       \
    switch (tile) {                                                                                          \
      case 14: detail::launch<14, G128>(x_map, x_map, p, ctas, stream, pdl); break;                          \
      case 15: detail::launch<15, G128>(x_map, x_map, p, ctas, stream, pdl); break;                          \
      case 16: detail::launch<16, G128>(x_map, x_map, p, ctas, stream, pdl); break;                          \
      default: QS_CUDA_CHECK(cudaErrorInvalidValue);                                                         \
    }                                                                                                        \
  }

}  // namespace qserve::cuda::w4a8::wgmma
