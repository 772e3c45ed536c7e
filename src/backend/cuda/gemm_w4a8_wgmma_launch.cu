// Host side of the sm_90a W4A8 kernels: the activations' TMA tensor map and
// the dispatch to the per-kind instantiations. No fmt / core/error.h here
// (nvcc's host pass does not compile fmt's consteval code).
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/tensor_map.h"

namespace qserve::cuda::w4a8::wgmma {

template <bool kG128>
void launch_kind(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                 cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_pd(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_cl(int tile, const CUtensorMap& x_map, const Params& p, int ctas, cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_mc(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_sk(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_skd(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                     cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_mid(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
                     cudaStream_t stream, bool pdl);
template <bool kG128>
void launch_kind_s8(int tile, const CUtensorMap& x_map, const CUtensorMap& w_map, const Params& p, int ctas,
                    cudaStream_t stream, bool pdl);

namespace {

// An INT8 tensor of `rank` dimensions (dims[0] innermost, byte strides of
// dims 1..) with boxes `box`, in the 128-byte swizzle that the wgmma
// descriptors read; elements out of range are filled with zeros.
CUtensorMap encode_int8_map(const int8_t* base, int rank, const cuuint64_t* dims, const cuuint64_t* strides,
                            const cuuint32_t* box) {
  CUtensorMap map{};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = tensor_map_encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, rank, const_cast<int8_t*>(base), dims,
                                            strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) QS_CUDA_CHECK(cudaErrorInvalidValue);  // bad shape or alignment (checked by the caller)
  return map;
}

// X [m, k] int8 row-major as a 2-D tensor (k innermost); box [bm rows][128 B]
// in the 128-byte swizzle that the wgmma B descriptor reads; rows >= m and
// columns >= k are filled with zeros. The INT8 weights [n, k] (s8 tiles) are
// mapped the same way with box [bn rows][128 B] (the A descriptor's layout).
CUtensorMap make_x_map(const int8_t* x, int m, int k, int bm) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(m)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k)};
  const cuuint32_t box[2] = {128, static_cast<cuuint32_t>(bm)};
  return encode_int8_map(x, 2, dims, strides, box);
}

// X [m, k] int8 row-major (k % 128 == 0) as a 3-D tensor [k/128 blocks][m
// rows][128 B] (a block's stride 128 B, a row's k): box [kd blocks][bm
// rows][128 B], written as kd 2-D boxes of make_x_map would be (rows, then
// blocks; the 128-byte swizzle by address), rows >= m and blocks >= k/128
// zeros. (With k % 128 == 64 the last block's second half would read the
// next row's first bytes instead of zeros, hence the 2-D map there.)
CUtensorMap make_x_map_3d(const int8_t* x, int m, int k, int bm, int kd) {
  const cuuint64_t dims[3] = {128, static_cast<cuuint64_t>(m), static_cast<cuuint64_t>(k / 128)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(k), 128};
  const cuuint32_t box[3] = {128, static_cast<cuuint32_t>(bm), static_cast<cuuint32_t>(kd)};
  return encode_int8_map(x, 3, dims, strides, box);
}

// Y [m, n] fp16 row-major (16-B aligned, n % 8 == 0) for the TMA epilogue's
// stores: box [rows][64 channels] (128 B) in the 128-byte swizzle of its
// staging; elements past m or n are not written.
CUtensorMap make_y_map(const __half* y, int m, int n, int rows) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(n), static_cast<cuuint64_t>(m)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(n) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = tensor_map_encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<__half*>(y), dims,
                                            strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) QS_CUDA_CHECK(cudaErrorInvalidValue);
  return map;
}

template <bool kG128>
void launch_w4(int tile, const CUtensorMap& x_map, const CUtensorMap& y_map, const Params& p, int ctas,
               cudaStream_t stream, bool pdl) {
  if (tile >= kFirstMcTile) return launch_kind_mc<kG128>(tile, x_map, y_map, p, ctas, stream, pdl);
  if (tile >= kFirstMidTile) return launch_kind_mid<kG128>(tile, x_map, y_map, p, ctas, stream, pdl);
  if (tile >= kFirstClusterTile) return launch_kind_cl<kG128>(tile, x_map, p, ctas, stream, pdl);
  if (tile >= kFirstPdTile) return launch_kind_pd<kG128>(tile, x_map, p, ctas, stream, pdl);
  if (p.stream_k && tile >= kFirstLargeStreamKTile && tile < kEndLargeStreamKTile)
    return launch_kind_sk<kG128>(tile, x_map, y_map, p, ctas, stream, pdl);
  if (p.stream_k) return launch_kind_skd<kG128>(tile, x_map, y_map, p, ctas, stream, pdl);
  launch_kind<kG128>(tile, x_map, y_map, p, ctas, stream, pdl);
}

}  // namespace

void launch_kernel(int tile, bool g128, const Params& p_in, int ctas, cudaStream_t stream, bool pdl) {
  if (tile < 0 || tile >= kTileCount || (tile >= kFirstS8Tile && tile < kFirstPdTile) ||
      (p_in.stream_k && !is_stream_k_tile(tile)))
    QS_CUDA_CHECK(cudaErrorInvalidValue);
  // (A multicast pair's CTA loads half of the token rows of a stage; the
  // deep-stage tiles a stage's blocks in one box where switched on.)
  const TileShape& t = kTiles[tile];
  Params p = p_in;
  p.x_3d = t.kd > 1 && !t.mc && p.k % 128 == 0 && x_3d();
  p.first_stages = first_stages_ahead(t.kd);  // (read by the kernels with two issuing threads)
  const CUtensorMap map = p.x_3d ? make_x_map_3d(p.x, p.m, p.k, t.bm, t.kd)
                                 : make_x_map(p.x, p.m, p.k, t.mc ? t.bm / 2 : t.bm);
  // The TMA epilogue's tiles get y's tensor map where it can describe y;
  // otherwise they copy their staged outputs out themselves.
  p.y_tma = 0;
  CUtensorMap y_map = map;  // (unused unless p.y_tma)
  if (tma_epilogue(kTiles[tile]) && p.y && p.n % 8 == 0 && reinterpret_cast<uintptr_t>(p.y) % 16 == 0) {
    y_map = make_y_map(p.y, p.m, p.n, tma_epi_rows(kTiles[tile].bm));
    p.y_tma = 1;
  }
  if (g128)
    launch_w4<true>(tile, map, y_map, p, ctas, stream, pdl);
  else
    launch_w4<false>(tile, map, y_map, p, ctas, stream, pdl);
}

void launch_kernel_s8(int tile, bool g128, const int8_t* w8, const Params& p, int ctas, cudaStream_t stream, bool pdl) {
  if (tile < kFirstS8Tile || tile >= kFirstPdTile) QS_CUDA_CHECK(cudaErrorInvalidValue);
  const CUtensorMap x_map = make_x_map(p.x, p.m, p.k, kTiles[tile].bm);
  const CUtensorMap w_map = make_x_map(w8, p.n, p.k, kTiles[tile].bn());
  // (The s8 kernels read neither Params::x_3d, kd = 1, nor first_stages,
  // one issuing thread.)
  if (g128)
    launch_kind_s8<true>(tile, x_map, w_map, p, ctas, stream, pdl);
  else
    launch_kind_s8<false>(tile, x_map, w_map, p, ctas, stream, pdl);
}

}  // namespace qserve::cuda::w4a8::wgmma
