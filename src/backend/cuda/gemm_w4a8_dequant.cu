// The W4 -> INT8 dequantization pass (gemm_w4a8_dequant.h). One warp per
// repacked 16 x 64 tile: lane L's 16 B (rows g = L / 4 and g + 8, k 16 w +
// 4 (L % 4) + b) are unpacked exactly as the wgmma consumers do
// (kernels/gemm_w4a8_unpack.cuh: unpack8), staged in shared memory as
// the tile's 16 rows x 64 B, and stored as 16-B row pieces.
#include "backend/cuda/gemm_w4a8_dequant.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_unpack.cuh"
#include "quant/w4a8_repack.h"

namespace qserve::cuda {
namespace {

constexpr int kWarps = 8;
// Staging rows padded to 80 B: the u32 writes of one instruction (rows g,
// columns 16 w + 4 q) hit distinct banks, and rows stay 16-B aligned.
constexpr int kRowBytes = 80;

template <bool kG128>
__global__ void __launch_bounds__(kWarps * 32) w4_dequant_kernel(const uint4* __restrict__ qw,
                                                                 const uint32_t* __restrict__ level2, int n, int k,
                                                                 int n16, int groups, int64_t tiles,
                                                                 int8_t* __restrict__ out) {
  __shared__ __align__(16) uint8_t stage[kWarps][16 * kRowBytes];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarps + warp;  // in memory order
  if (tile >= tiles) return;
  const int k64 = k >> 6;
  const int tib = static_cast<int>(tile % 8), kt = static_cast<int>((tile / 8) % k64);
  const int t16 = static_cast<int>(tile / 8 / k64) * 8 + tib;  // 16-channel tile
  const uint4 v = __ldg(qw + tile * 32 + lane);
  w4a8::wgmma::Level2 l{};
  if constexpr (kG128) {
    const uint32_t e = t16 < n16 ? __ldg(level2 + quant::level2_word_offset(t16, kt / 2, groups) + g) : 0x00010001u;
    l = w4a8::wgmma::level2_params(e);
  }
  uint8_t* st = stage[warp];
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    uint32_t lo, hi;
    w4a8::wgmma::unpack8<kG128>(words[w], l, lo, hi);
    *reinterpret_cast<uint32_t*>(st + g * kRowBytes + 16 * w + 4 * q) = lo;
    *reinterpret_cast<uint32_t*>(st + (g + 8) * kRowBytes + 16 * w + 4 * q) = hi;
  }
  __syncwarp();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int c = lane + 32 * r, row = c >> 2, piece = c & 3;
    const int o = t16 * 16 + row;
    if (o < n)
      *reinterpret_cast<uint4*>(out + static_cast<size_t>(o) * k + kt * 64 + piece * 16) =
          *reinterpret_cast<const uint4*>(st + row * kRowBytes + piece * 16);
  }
}

}  // namespace

void launch_w4_dequant(const uint8_t* qweight, const uint32_t* level2, int64_t n, int64_t k, int64_t n16,
                       int64_t groups, bool g128, int8_t* out, cudaStream_t stream) {
  if (k % 64 != 0 || n <= 0) QS_CUDA_CHECK(cudaErrorInvalidValue);
  const int64_t tiles = (n + 127) / 128 * 8 * (k / 64);
  const dim3 grid(static_cast<unsigned>((tiles + kWarps - 1) / kWarps));
  const auto* qw = reinterpret_cast<const uint4*>(qweight);
  if (g128)
    w4_dequant_kernel<true><<<grid, kWarps * 32, 0, stream>>>(qw, level2, static_cast<int>(n), static_cast<int>(k),
                                                              static_cast<int>(n16), static_cast<int>(groups), tiles, out);
  else
    w4_dequant_kernel<false><<<grid, kWarps * 32, 0, stream>>>(qw, level2, static_cast<int>(n), static_cast<int>(k),
                                                               static_cast<int>(n16), static_cast<int>(groups), tiles, out);
  QS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace qserve::cuda
