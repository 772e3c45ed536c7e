// Instantiates the W4A8 kernel for every (tile, kind). No fmt / core/error.h
// here: nvcc's host pass does not compile fmt's consteval code.
#include "backend/cuda/gemm_w4a8_launch.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemm_w4a8_kernel.cuh"

namespace qserve::cuda::w4a8 {
namespace {

template <int kTile>
using Config = TileConfig<kTiles[kTile].bn, kTiles[kTile].bm, kTiles[kTile].warps_n, kTiles[kTile].warps_m,
                          kTiles[kTile].stages>;

template <int kTile, bool kG128>
void launch(const KernelParams& p, dim3 grid, cudaStream_t stream) {
  using Cfg = Config<kTile>;
  auto* kernel = &gemm_w4a8_kernel<Cfg, kG128>;
  // Opting in to more than 48 KB of dynamic shared memory, once per kernel
  // (single-device process assumed, as the backend is).
  static const bool configured = [&] {
    QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
    return true;
  }();
  (void)configured;
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  QS_CUDA_CHECK_LAUNCH();
}

template <int kTile>
void launch_kind(bool g128, const KernelParams& p, dim3 grid, cudaStream_t stream) {
  if (g128)
    launch<kTile, true>(p, grid, stream);
  else
    launch<kTile, false>(p, grid, stream);
}

}  // namespace

void launch_kernel(int tile, bool g128, const KernelParams& p, dim3 grid, cudaStream_t stream) {
  switch (tile) {
    case 0: launch_kind<0>(g128, p, grid, stream); break;
    case 1: launch_kind<1>(g128, p, grid, stream); break;
    case 2: launch_kind<2>(g128, p, grid, stream); break;
    case 3: launch_kind<3>(g128, p, grid, stream); break;
    case 4: launch_kind<4>(g128, p, grid, stream); break;
    case 5: launch_kind<5>(g128, p, grid, stream); break;
    default: QS_CUDA_CHECK(cudaErrorInvalidValue);  // no such tile
  }
  static_assert(kTileCount == 6, "add the new tile to the switch");
}

}  // namespace qserve::cuda::w4a8
