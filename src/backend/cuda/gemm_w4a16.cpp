#include "backend/cuda/gemm_w4a16.h"

#include <algorithm>
#include <bit>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_w4a16_launch.h"
#include "core/error.h"
#include "quant/w4a16_repack.h"

namespace qserve::cuda {
namespace {

int group_shift_of(const W4A16DeviceWeights& w) { return std::countr_zero(static_cast<uint64_t>(w.group / 64)); }

w4a16::StreamParams stream_params(const W4A16DeviceWeights& w, const __half* x, int64_t m, __half* y) {
  w4a16::StreamParams p;
  p.x = x;
  p.w = w.qweight.as<uint4>();
  p.params = w.params.as<uint2>();
  p.y = y;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(w.n);
  p.k = static_cast<int>(w.k);
  p.n16 = static_cast<int>(w.n16);
  p.kt_total = static_cast<int>(w.k / 64);
  p.groups = static_cast<int>(w.groups);
  p.group_shift = group_shift_of(w);
  return p;
}

}  // namespace

bool w4a16_layout_supported(int64_t k, int64_t group) {
  return k > 0 && group > 0 && k % 64 == 0 && group % 64 == 0 && std::has_single_bit(static_cast<uint64_t>(group / 64));
}

W4A16DeviceWeights upload_w4a16(const quant::W4A16Weights& w) {
  if (!w4a16_layout_supported(w.k, w.group))
    fail(ErrorCode::kUnsupported, "CUDA W4A16: k = {} and group = {} must be multiples of 64 (group / 64 a power of two)",
         w.k, w.group);
  W4A16DeviceWeights d;
  d.n = w.n;
  d.k = w.k;
  d.n16 = (w.n + 15) / 16;
  d.groups = w.groups();
  d.group = w.group;
  const std::vector<uint8_t> q = quant::repack_w4a16(w);
  const std::vector<uint32_t> p = quant::repack_w4a16_params(w);
  d.qweight = DeviceBuffer(q.size());
  d.qweight.upload(q);
  d.params = DeviceBuffer(p.size() * sizeof(uint32_t));
  d.params.upload(p);
  return d;
}

// From the H200 sweep (bench/results/2026-11-30-w4a16-h200.md): at m <= 8 one
// row tile per warp except on the widest layers; above, two row tiles x two
// token tiles, which up to m = 64 still beats dequantize + cuBLAS by 1.7-2x.
int w4a16_stream_tile(int64_t m, int64_t n) {
  if (m <= 8) return n >= 16384 ? 1 : 0;
  if (m <= kW4A16StreamMaxM) return 3;
  return -1;
}

int64_t w4a16_slice_rows(int64_t n, int64_t k, size_t scratch_bytes) {
  const int64_t rows = static_cast<int64_t>(scratch_bytes / (static_cast<size_t>(k) * 2)) / 16 * 16;
  return std::min<int64_t>(std::max<int64_t>(rows, 16), (n + 15) / 16 * 16);
}

void gemm_w4a16_dequant_cublas(const W4A16DeviceWeights& w, const __half* x, int64_t m, __half* y, void* scratch,
                               size_t scratch_bytes, cublasHandle_t cublas, cudaStream_t stream) {
  QS_CHECK(scratch_bytes >= static_cast<size_t>(16 * w.k * 2)) << "W4A16 scratch of " << scratch_bytes << " bytes";
  const int64_t slice = w4a16_slice_rows(w.n, w.k, scratch_bytes);
  const w4a16::StreamParams p = stream_params(w, x, m, y);
  QS_CUDA_CHECK(cublasSetStream(cublas, stream));
  const float alpha = 1.0f, beta = 0.0f;
  for (int64_t row0 = 0; row0 < w.n; row0 += slice) {
    const int64_t rows = std::min(slice, w.n - row0);
    w4a16::launch_dequant(p, static_cast<int>(row0 / 16), static_cast<int>((rows + 15) / 16),
                          static_cast<__half*>(scratch), stream);
    // Row-major Y[m, rows] slice = X[m, k] W_slice[rows, k]^T: column-major Y^T (ldc n) = op(W_slice) X^T.
    QS_CUDA_CHECK(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(m),
                               static_cast<int>(w.k), &alpha, scratch, CUDA_R_16F, static_cast<int>(w.k), x, CUDA_R_16F,
                               static_cast<int>(w.k), &beta, y + row0, CUDA_R_16F, static_cast<int>(w.n),
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

void gemm_w4a16(const W4A16DeviceWeights& w, const __half* x, int64_t m, __half* y, void* scratch,
                size_t scratch_bytes, cublasHandle_t cublas, cudaStream_t stream, int stream_tile) {
  if (m == 0) return;
  const int tile = stream_tile >= 0 ? stream_tile : w4a16_stream_tile(m, w.n);
  if (tile < 0) return gemm_w4a16_dequant_cublas(w, x, m, y, scratch, scratch_bytes, cublas, stream);
  if (tile >= kW4A16StreamTileCount) fail(ErrorCode::kInvalidArgument, "W4A16: unknown streaming tile {}", tile);
  // One grid row per 8 NT tokens (grid.y <= 65535).
  QS_CHECK(m <= int64_t{8} * kW4A16StreamTiles[tile].nt * 65535) << "W4A16 streaming tile " << tile << " for m = " << m;
  QS_CHECK(w4a16::launch_stream(tile, stream_params(w, x, m, y), stream));
}

}  // namespace qserve::cuda
