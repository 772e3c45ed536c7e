// Instantiates the W4A8 kernel for every (tile, kind). No fmt / core/error.h
// here: nvcc's host pass does not compile fmt's consteval code.
#include "backend/cuda/gemm_w4a8_launch.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch_pdl.cuh"
#include "backend/cuda/kernels/gemm_w4a8_kernel.cuh"

namespace qserve::cuda::w4a8 {
namespace {

template <int kTile>
using Config = TileConfig<kTiles[kTile].bn, kTiles[kTile].bm, kTiles[kTile].warps_n, kTiles[kTile].warps_m,
                          kTiles[kTile].stages>;

template <int kTile, bool kG128>
void launch(const KernelParams& p, dim3 grid, cudaStream_t stream, bool pdl) {
  using Cfg = Config<kTile>;
  auto* kernel = &gemm_w4a8_kernel<Cfg, kG128>;
  // Opting in to more than 48 KB of dynamic shared memory, once per kernel
  // (single-device process assumed, as the backend is).
  static const bool configured = [&] {
    QS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
    return true;
  }();
  (void)configured;
  launch_maybe_pdl(kernel, grid, dim3(Cfg::kThreads), Cfg::kSmemBytes, stream, pdl, p);
}

template <int kTile>
void launch_kind(bool g128, const KernelParams& p, dim3 grid, cudaStream_t stream, bool pdl) {
  if (g128)
    launch<kTile, true>(p, grid, stream, pdl);
  else
    launch<kTile, false>(p, grid, stream, pdl);
}

}  // namespace

void launch_kernel(int tile, bool g128, const KernelParams& p, dim3 grid, cudaStream_t stream, bool pdl) {
  switch (tile) {
    case 0: launch_kind<0>(g128, p, grid, stream, pdl); break;
    case 1: launch_kind<1>(g128, p, grid, stream, pdl); break;
    case 2: launch_kind<2>(g128, p, grid, stream, pdl); break;
    case 3: launch_kind<3>(g128, p, grid, stream, pdl); break;
    case 4: launch_kind<4>(g128, p, grid, stream, pdl); break;
    case 5: launch_kind<5>(g128, p, grid, stream, pdl); break;
    default: QS_CUDA_CHECK(cudaErrorInvalidValue);  // no such tile
  }
  static_assert(kTileCount == 6, "add the new tile to the switch");
}

}  // namespace qserve::cuda::w4a8
