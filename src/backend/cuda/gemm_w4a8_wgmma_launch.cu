// Host side of the sm_90a W4A8 kernels: the activations' TMA tensor map and
// the dispatch to the per-kind instantiations. No fmt / core/error.h here
// (nvcc's host pass does not compile fmt's consteval code).
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include "backend/cuda/cuda_check.h"

namespace qserve::cuda::w4a8::wgmma {

template <bool kG128>
void launch_kind(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_pd(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_cl(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_sk(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_s8(int tile, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl);

namespace {

// cuTensorMapEncodeTiled from the driver, found once through the runtime (no
// link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult result{};
    QS_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &result));
    if (result != cudaDriverEntryPointSuccess || !f) QS_CUDA_CHECK(cudaErrorSymbolNotFound);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// X [m, k] int8 row-major as a 2-D tensor (k innermost); box [bm rows][128 B]
// in the 128-byte swizzle that the wgmma B descriptor reads; rows >= m and
// columns >= k are filled with zeros. The INT8 weights [n, k] (s8 tiles) are
// mapped the same way with box [bn rows][128 B] (the A descriptor's layout).
CUtensorMap make_x_map(const int8_t* x, int m, int k, int bm) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(m)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k)};  // bytes, dims 1..
  const cuuint32_t box[2] = {128, static_cast<cuuint32_t>(bm)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<int8_t*>(x), dims, strides, box,
                                 elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) QS_CUDA_CHECK(cudaErrorInvalidValue);  // bad shape or alignment (checked by the caller)
  return map;
}

// The launcher of the family that holds W4 tile `tile` (W4, pd or cluster).
using W4Launcher = void (*)(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
template <bool kG128>
W4Launcher w4_family_launcher(int tile, bool stream_k) {
  if (stream_k) return &launch_kind_sk<kG128>;
  if (tile >= kFirstClusterTile) return &launch_kind_cl<kG128>;
  if (tile >= kFirstPdTile) return &launch_kind_pd<kG128>;
  return &launch_kind<kG128>;
}

}  // namespace

void launch_kernel(int tile, bool g128, const Params& p, int ctas, cudaStream_t stream, bool pdl) {
  if (tile < 0 || tile >= kTileCount || (tile >= kFirstS8Tile && tile < kFirstPdTile) ||
      (p.stream_k && !is_stream_k_tile(tile)))
    QS_CUDA_CHECK(cudaErrorInvalidValue);
  const CUtensorMap map = make_x_map(p.x, p.m, p.k, kTiles[tile].bm);
  const bool sk = p.stream_k != 0;
  (g128 ? w4_family_launcher<true>(tile, sk) : w4_family_launcher<false>(tile, sk))(tile, map, p, ctas, stream, pdl);
}

void launch_kernel_s8(int tile, bool g128, const int8_t* w8, const Params& p, int ctas, cudaStream_t stream, bool pdl) {
  if (tile < kFirstS8Tile || tile >= kFirstPdTile) QS_CUDA_CHECK(cudaErrorInvalidValue);
  const CUtensorMap x_map = make_x_map(p.x, p.m, p.k, kTiles[tile].bm);
  const CUtensorMap w_map = make_x_map(w8, p.n, p.k, kTiles[tile].bn());
  if (g128)
    launch_kind_s8<true>(tile, x_map, w_map, p, ctas, stream, pdl);
  else
    launch_kind_s8<false>(tile, x_map, w_map, p, ctas, stream, pdl);
}

}  // namespace qserve::cuda::w4a8::wgmma
