// Host side of the sm_90a W4A8 kernels: the activations' TMA tensor map and
// the dispatch to the per-kind instantiations. No fmt / core/error.h here
// (nvcc's host pass does not compile fmt's consteval code).
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdlib>
#include <optional>

#include "backend/cuda/cuda_check.h"

namespace qserve::cuda::w4a8::wgmma {

template <bool kG128>
void launch_kind(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_pd(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_cl(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
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

// The deep-stage tiles' view of X [m, k] (k % 128 == 0): 3-D [k / 128 blocks]
// [m rows][128 B], box [kd blocks][bm rows][128 B], so that one box lands as
// kd consecutive [bm][128 B] tiles in the same 128-byte swizzle as make_x_map's
// boxes (each tile starts 1024-B aligned). The block stride (128 B) is below
// the row stride (k): if the driver refuses that view, nullopt (the kernel
// then takes one 2-D box per block).
std::optional<CUtensorMap> make_x_map_deep(const int8_t* x, int m, int k, int bm, int kd) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {128, static_cast<cuuint64_t>(m), static_cast<cuuint64_t>(k / 128)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(k), 128};  // bytes, dims 1..
  const cuuint32_t box[3] = {128, static_cast<cuuint32_t>(bm), static_cast<cuuint32_t>(kd)};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<int8_t*>(x), dims, strides, box,
                                 elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return std::nullopt;
  return map;
}

// The launcher of the family that holds W4 tile `tile` (W4, pd or cluster).
using W4Launcher = void (*)(int, const CUtensorMap&, const Params&, int, cudaStream_t, bool);
template <bool kG128>
W4Launcher w4_family_launcher(int tile) {
  if (tile >= kFirstClusterTile) return &launch_kind_cl<kG128>;
  if (tile >= kFirstPdTile) return &launch_kind_pd<kG128>;
  return &launch_kind<kG128>;
}

}  // namespace

void launch_kernel(int tile, bool g128, const Params& p, int ctas, cudaStream_t stream, bool pdl) {
  if (tile < 0 || tile >= kTileCount || (tile >= kFirstS8Tile && tile < kFirstPdTile))
    QS_CUDA_CHECK(cudaErrorInvalidValue);
  const TileShape& s = kTiles[tile];
  Params q = p;
  q.x_deep_box = 0;
  CUtensorMap map{};
  if (s.kd > 1) {
    if (p.k % 128 != 0) QS_CUDA_CHECK(cudaErrorInvalidValue);  // deep stages need whole 128-wide blocks
    // QSERVE_GEMM_X_2D=1: the 2-D boxes even where the 3-D view works (benchmarks).
    static const bool force_2d = [] {
      const char* e = std::getenv("QSERVE_GEMM_X_2D");
      return e && e[0] == '1';
    }();
    if (const auto deep = force_2d ? std::nullopt : make_x_map_deep(p.x, p.m, p.k, s.bm, s.kd)) {
      map = *deep;
      q.x_deep_box = 1;
    }
  }
  if (!q.x_deep_box) map = make_x_map(p.x, p.m, p.k, s.bm);
  (g128 ? w4_family_launcher<true>(tile) : w4_family_launcher<false>(tile))(tile, map, q, ctas, stream, pdl);
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
