// W4A8 GEMM on INT8 tensor cores (mma.sync m16n8k32), QServe's design:
// Y[t, o] (fp16) = epilogue(sum_i Xq[t, i] * W[o, i]), per-channel or g128
// (docs/quantized-checkpoint.md; epilogues in quant/gemm_epilogue.h).
//
// Weights are repacked at load time into the kernel's compute order
// (quant/w4a8_repack.h): one 128-bit load per lane per 16x64 tile, INT4 ->
// INT8 by a mask and a shift per 8 values, g128 level 2 by a multiply-add and
// an XOR per 4 values (the sm_90a kernels skip the XOR: biased weights, u8 x
// s8, W4A8Args::x_sum); per-channel zero points leave the main loop (a_sum).
// Multi-stage cp.async pipeline, XOR-swizzled activation tiles read by
// ldmatrix, tile shape by problem size, split-K with an in-kernel fix-up (the
// last CTA of a tile sums the partials) when the grid would not fill the GPU.
//
// On sm_90 devices a second kernel family joins (docs/gemm-hopper.md): INT8
// wgmma with the dequantized weights as the register operand (Y^T = W X^T),
// activations through TMA, warp-specialized and persistent. It reads the same
// repacked weights. The planner picks the family and tile per problem size;
// tile ids < kW4A8FirstWgmmaTile are mma.sync tiles, the others wgmma tiles.
// The wgmma family also has INT8-weight tiles (W8A8; W4 after a pass that
// dequantizes the weights into the workspace, plan.scratch_bytes, when asked
// for), the same consumers fed by a dequantizing producer (the pd tiles), and
// W4 tiles with split-K within a thread block cluster (small and mid m), and
// with it (ids >= kW4A8FirstWgmmaTile, sm_90 only) the decode kernels for m <=
// 8 / 16 (mma.sync, weights straight into registers, gemm_w4a8_gemv.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm_w4a8_gemv.h"
#include "quant/weight_format.h"

namespace qserve::cuda {

enum class W4A8Kind { kPerChannel, kG128 };

// Device weights in compute order.
struct W4A8DeviceWeights {
  W4A8Kind kind = W4A8Kind::kG128;
  int64_t n = 0, k = 0, n16 = 0, groups = 0;
  DeviceBuffer qweight;   // [n/128][k/64][8][32][16] bytes
  DeviceBuffer level2;    // g128: [ceil(n/128)][groups][8][8] uint32 (s2, scaled zero of rows g, g+8)
  DeviceBuffer ch_scale;  // [n16*16] f32: s1 (g128) or s (per-channel)
  DeviceBuffer ch_szero;  // [n16*16] f32: s * z (per-channel)
  size_t weight_bytes() const { return qweight.size() + level2.size() + ch_scale.size() + ch_szero.size(); }
};

// Repack (host, threaded) and upload. k must be a multiple of 64.
W4A8DeviceWeights upload_w4a8(const quant::W4G128Weights& w);
W4A8DeviceWeights upload_w4a8(const quant::W4PerChannelWeights& w);

inline constexpr int kW4A8FirstWgmmaTile = 6;  // mma.sync tiles 0..5 (any sm_80+ device)
inline constexpr int kW4A8TileCount = 59;       // wgmma tiles 6..51, the decode tiles 52..58 (sm_90 only)
// Tiles 16..19: INT8-weight wgmma tiles, run after a pass that dequantizes
// the W4 weights into an INT8 copy in the workspace (docs/gemm-hopper.md).
inline constexpr int kW4A8FirstS8Tile = 16;
// Tiles 20..22: the INT8-weight tiles' consumers fed by a producer that
// dequantizes the W4 weights into shared memory itself (no pass, no copy).
// Not in the planner: 0.36-0.50x of cuBLASLt INT8 (docs/gemm-hopper.md).
inline constexpr int kW4A8FirstPdTile = 20;
// Tiles 23..46: the W4 wgmma kernel with split-K across the CTAs of a thread
// block cluster (partial tiles summed through distributed shared memory; no
// workspace), at most 8 splits (the cluster size); one CTA per work unit.
inline constexpr int kW4A8FirstClusterTile = 23;
// Tiles 31..43 and 45..46 (cluster tiles): deep stages, 256 or 512 k per
// pipeline stage (fewer, larger copies). Tiles 40..42 (round 23): the 128 x 32
// cluster tile (256- and 512-deep, and 256-deep at two CTAs per SM), between
// 128 x 16 and 128 x 64; the ids of the tiles after them moved up by 3 in that
// round. Tile 43 (round 25): 128 x 128, 256-deep (the ids after it moved up by
// one). Tiles 44..46 (round 51): the cluster tiles of 64 channels (wg64x64c,
// wg64x32c-k256, wg64x64c-k256; one consumer warpgroup's channels per CTA,
// twice the CTAs of their 128-channel twins; planned through the measured
// table at m = 33-64); the ids after them moved up by 3.
inline constexpr int kW4A8FirstDeepTile = 31;
inline constexpr int kW4A8FirstBn64Tile = 44;
inline constexpr int kW4A8EndClusterTile = 47;
// Tiles 47..50: persistent W4 tiles of 128 channels x 160 / 192 / 208 / 224
// tokens (wg128x160 .. wg128x224), between wg128x128 and wg128x256: at mid m
// they often need fewer waves of output tiles over the SMs.
inline constexpr int kW4A8FirstMidTile = 47, kW4A8EndMidTile = 51;
// Tile 51: the multicast pair of wg128x256 (wg128x256mc): two CTAs of a
// cluster compute neighbouring channel blocks of the same tokens, each
// loading half of a stage's activations into both (half the activation
// traffic from L2). Planned for the largest problems only (gemm_w4a8_wgmma.cpp).
inline constexpr int kW4A8FirstMcTile = 51;
// Tiles 52..58: the decode kernels for m <= 8 / 16 / 8 / 16 / 8 / 16 / 32
// (gemv8, gemv16, gemv8d, gemv16d, gemv8r, gemv16r, gemv32r; gemm_w4a8_gemv.h):
// 16-channel tiles, weights loaded straight into registers by every SM,
// mma.sync; no split-K (splits 1), no workspace.
inline constexpr int kW4A8FirstGemvTile = 52;
inline bool w4a8_tile_is_gemv(int tile) { return tile >= kW4A8FirstGemvTile && tile < kW4A8TileCount; }
static_assert(kW4A8TileCount - kW4A8FirstGemvTile == w4a8::gemv::kKernelCount);
// The decode kernel of a decode tile, and the tile of a decode kernel.
inline w4a8::gemv::Kernel w4a8_gemv_kernel(int tile) { return static_cast<w4a8::gemv::Kernel>(tile - kW4A8FirstGemvTile); }
constexpr int w4a8_gemv_tile(w4a8::gemv::Kernel kernel) { return kW4A8FirstGemvTile + static_cast<int>(kernel); }
// Whether decode tile `tile` runs a layer of depth k on this device (the
// resident kernels keep each warp's activation rows in shared memory; the
// others run any k). Without a device's figure (planner tests) sm_90's.
bool w4a8_gemv_fits(const DeviceInfo& dev, int tile, int64_t k, bool g128);
inline constexpr int kW4A8MaxClusterSplits = 8;
inline bool w4a8_tile_is_s8(int tile) { return tile >= kW4A8FirstS8Tile && tile < kW4A8FirstPdTile; }
inline bool w4a8_tile_is_pd(int tile) { return tile >= kW4A8FirstPdTile && tile < kW4A8FirstClusterTile; }
inline bool w4a8_tile_is_cluster(int tile) { return tile >= kW4A8FirstClusterTile && tile < kW4A8EndClusterTile; }
// The cluster tiles of 64 channels (wg64x64c, wg64x32c-k256, wg64x64c-k256).
constexpr bool w4a8_tile_is_bn64(int tile) { return tile >= kW4A8FirstBn64Tile && tile < kW4A8EndClusterTile; }
// (wg64x64c, the first 64-channel tile, has 128-deep stages.)
constexpr bool w4a8_tile_is_deep(int tile) {
  return tile >= kW4A8FirstDeepTile && tile < kW4A8EndClusterTile && tile != kW4A8FirstBn64Tile;
}
const char* w4a8_tile_name(int tile);
// Tokens per CTA tile of `tile` (the wgmma N of the wgmma tiles), 0 for an unknown id.
int w4a8_tile_tokens(int tile);
// The cluster tiles of up to 64 tokens (decode and small m): their time
// follows the weight bytes, so above m = 128 their table entries serve the
// whole bucket (measured_w4a8_plan, plan_w4a8_wgmma); the 128 x 128 cluster
// tile is held to the bucket rules of the other 128-token tiles.
inline bool w4a8_tile_is_small_cluster(int tile) { return w4a8_tile_is_cluster(tile) && w4a8_tile_tokens(tile) <= 64; }
constexpr bool w4a8_tile_is_wgmma(int tile) { return tile >= kW4A8FirstWgmmaTile; }
// Whether `tile` runs on this device (the wgmma tiles need compute capability 9.0).
bool w4a8_tile_supported(const DeviceInfo& dev, int tile);
bool w4a8_wgmma_supported(const DeviceInfo& dev);

// A `splits` value (force_splits, W4A8Plan::splits): stream-K instead of
// split-K, for the persistent W4 wgmma tiles 6..15 (the decode tiles
// wg256x8 .. wg256x64 and their two-accumulator forms, and the large tiles
// wg256x128, wg128x256, wg128x128): the k stages of all output tiles cut into
// one equal range per persistent CTA, so that no wave is partial and a layer
// of fewer output tiles than SMs still runs on every SM
// (kernels/gemm_w4a8_wgmma_units.cuh). The decode tiles' form lost to the
// shipped plans on every decode row (round 22); no table entry takes it.
inline constexpr int kW4A8StreamK = -1;
inline constexpr int kW4A8FirstStreamKTile = 6, kW4A8EndStreamKTile = 16;
inline bool w4a8_tile_has_stream_k(int tile) { return tile >= kW4A8FirstStreamKTile && tile < kW4A8EndStreamKTile; }
// A plan as "TILE/SPLITS" (SPLITS: the split-K factor, or sk for stream-K),
// the form of QSERVE_W4A8_PLANS and of the benchmark's sweeps.
std::string w4a8_plan_name(int tile, int splits);

struct W4A8Plan {
  int tile = 0;
  int splits = 1;            // split-K factor (1: none), or kW4A8StreamK
  int kt_per_split = 0;      // 64-wide k tiles per split
  int grid_n = 0, grid_m = 0;  // output tiles along channels and tokens
  // wgmma tiles: persistent CTAs; the mma.sync and cluster tiles' grid is
  // grid_n x grid_m x splits (one CTA per unit).
  int ctas = 0;
  // The CTAs the launch starts: ctas where set, else one per unit.
  int64_t launched_ctas() const { return ctas > 0 ? ctas : int64_t{grid_n} * grid_m * splits; }
  size_t workspace_bytes = 0;
  size_t scratch_bytes = 0;    // s8 tiles: the INT8 weight copy [n, k], after the split-K part
  bool pdl = false;            // programmatic dependent launch (launch_pdl.cuh; sm_90+)

  int64_t tile_ints = 0;       // wgmma tiles: outputs per CTA tile (a partial piece's INT32 count); else 0

  // The split-K workspace: [grid_n * grid_m] int32 tile counters (padded to 256
  // bytes), then the INT32 partial sums when splits > 1: wgmma tiles (tile_ints
  // > 0) one piece per output tile and split, [grid_n][grid_m][splits][tile_ints];
  // the mma.sync tiles [splits, m, n]; stream-K the pieces [ctas][2][tile_ints].
  size_t counter_bytes() const { return (static_cast<size_t>(grid_n) * grid_m * 4 + 255) / 256 * 256; }
  size_t workspace_bytes_for(int64_t m, int64_t n) const {
    if (splits == kW4A8StreamK) return counter_bytes() + static_cast<size_t>(ctas) * 2 * tile_ints * 4;
    if (splits <= 1) return counter_bytes();
    if (tile_ints > 0) return counter_bytes() + static_cast<size_t>(grid_n) * grid_m * splits * tile_ints * 4;
    return counter_bytes() + static_cast<size_t>(splits) * m * n * 4;
  }
  // s8 tiles: where the INT8 weight copy starts (256-B aligned) in the workspace.
  size_t scratch_offset(int64_t m, int64_t n) const { return (workspace_bytes_for(m, n) + 255) / 256 * 256; }
};

// Chooses the kernel family, tile and split-K for one problem. force_tile >= 0
// and force_splits > 0 (or kW4A8StreamK) override the choice (tests, tuning).
W4A8Plan plan_w4a8(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile = -1, int force_splits = 0,
                   bool g128 = true);
// The choice within one family (force_tile: an id of that family or -1).
W4A8Plan plan_w4a8_mma(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile = -1,
                       int force_splits = 0, bool g128 = true);
W4A8Plan plan_w4a8_wgmma(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile = -1,
                         int force_splits = 0, bool g128 = true);
inline W4A8Plan plan_w4a8(const DeviceInfo& dev, const W4A8DeviceWeights& w, int64_t m, int force_tile = -1,
                          int force_splits = 0) {
  return plan_w4a8(dev, m, w.n, w.k, force_tile, force_splits, w.kind == W4A8Kind::kG128);
}

struct W4A8Args {
  const int8_t* x = nullptr;    // [m, k] row-major
  const __half* s_x = nullptr;  // [m]
  const __half* a_sum = nullptr;  // [m], per-channel only
  // [m] g128 only: the token's INT8 code sum sum_i Xq[t, i] (exact). The sm_90a
  // kernels multiply the level-2 weights biased by 128 as unsigned bytes and
  // subtract 128 x_sum (docs/gemm-hopper.md, "Biased level-2 weights").
  const int32_t* x_sum = nullptr;
  int64_t m = 0;
  __half* y = nullptr;          // [m, n] row-major
  int32_t* acc_out = nullptr;   // optional [m, n]: write the exact INT32 accumulators instead of y
};

// `workspace` holds plan.workspace_bytes, zeroed once before its first use
// (the kernel leaves it zeroed again). Safe to capture in a CUDA graph.
void gemm_w4a8(const W4A8DeviceWeights& w, const W4A8Args& args, const W4A8Plan& plan, void* workspace,
               cudaStream_t stream);

}  // namespace qserve::cuda
