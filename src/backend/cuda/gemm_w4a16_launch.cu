#include "backend/cuda/gemm_w4a16_launch.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_w4a16.h"
#include "backend/cuda/kernels/gemm_w4a16_kernel.cuh"

namespace qserve::cuda::w4a16 {
namespace {

template <int MT, int NT, int WK, int U>
void launch_tile(const StreamParams& p, cudaStream_t stream) {
  constexpr int kSmem = WK * MT * NT * 4 * 32 * 4;  // the partial tiles of the WK warps
  auto* kernel = &w4a16_stream_kernel<MT, NT, WK, U>;
  if constexpr (kSmem > 48 * 1024) {
    static const bool once = [kernel] {
      QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      return true;
    }();
    (void)once;
  }
  const dim3 grid((p.n16 + MT - 1) / MT, (p.m + NT * 8 - 1) / (NT * 8));
  kernel<<<grid, WK * 32, kSmem, stream>>>(p);
  QS_CUDA_CHECK(cudaGetLastError());
}

static_assert(kW4A16StreamTileCount == 5, "launch_stream covers every tile of kW4A16StreamTiles");

}  // namespace

bool launch_stream(int tile, const StreamParams& p, cudaStream_t stream) {
  switch (tile) {
    case 0: launch_tile<1, 1, 8, 4>(p, stream); return true;
    case 1: launch_tile<2, 1, 8, 4>(p, stream); return true;
    case 2: launch_tile<1, 2, 8, 2>(p, stream); return true;
    case 3: launch_tile<2, 2, 8, 2>(p, stream); return true;
    case 4: launch_tile<4, 2, 8, 2>(p, stream); return true;
  }
  return false;
}

void launch_dequant(const StreamParams& p, int row16_0, int rows16, __half* out, cudaStream_t stream) {
  const int64_t threads = static_cast<int64_t>(rows16) * p.kt_total * 32;
  w4a16_dequant_kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(
      p.w, p.params, out, row16_0, rows16, p.kt_total, p.groups, p.group_shift, p.n, p.k);
  QS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace qserve::cuda::w4a16
