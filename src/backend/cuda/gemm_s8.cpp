// W8A8 on the INT8-weight wgmma tiles, and the dequantization pass on its own
// (gemm_s8.h; kernels: gemm_w4a8_wgmma_s8_*.cu, gemm_w4a8_dequant.cu).
#include "backend/cuda/gemm_s8.h"

#include "backend/cuda/gemm_w4a8_dequant.h"
#include "backend/cuda/gemm_w4a8_wgmma.h"
#include "core/error.h"

namespace qserve::cuda {

bool s8_wgmma_supported(const DeviceInfo& dev, int64_t k) { return w4a8_wgmma_supported(dev) && k % 64 == 0; }

// Measured on the H200 (bench/results/2026-11-30-gemm-s8-h200.md), the 9
// benchmark layers at m = 256, 1024, 4096, 8192: the fused kernel 1.00-1.61x
// faster than cuBLASLt INT8 + the epilogue kernel on every row (on the
// planner's tile). Smaller m was not measured: cuBLASLt stays there.
bool use_s8_w8a8(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k) {
  (void)n;
  return s8_wgmma_supported(dev, k) && m >= 256;
}

W4A8Plan plan_s8(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_tile, int force_splits) {
  QS_CHECK(force_tile < 0 || w4a8_tile_is_s8(force_tile)) << "not an INT8-weight tile: " << force_tile;
  W4A8Plan best = force_tile >= 0 ? plan_w4a8_wgmma(dev, m, n, k, force_tile, force_splits, true)
                                  : plan_w4a8_wgmma_s8(dev, m, n, k, force_splits);
  best.scratch_bytes = 0;  // the weights are INT8 already
  best.workspace_bytes = best.workspace_bytes_for(m, n);
  return best;
}

void gemm_s8_w8a8(const int8_t* w, const float* s_w, int64_t n, int64_t k, const W4A8Args& args, const W4A8Plan& plan,
                  void* workspace, cudaStream_t stream) {
  QS_CHECK(w4a8_tile_is_s8(plan.tile) && k % 64 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0);
  w4a8::wgmma::Params p = wgmma_params(args, plan, workspace, n, k);
  p.ch_scale = s_w;
  p.w_after_wait = 0;  // static weights: their first stages stream in under the previous kernel (PDL)
  w4a8::wgmma::launch_kernel_s8(plan.tile - kW4A8FirstWgmmaTile, true, w, p, plan.ctas, stream, plan.pdl);
}

void dequantize_w4a8(const W4A8DeviceWeights& w, int8_t* out, cudaStream_t stream) {
  launch_w4_dequant(w.qweight.as<const uint8_t>(), w.level2.as<const uint32_t>(), w.n, w.k, w.n16, w.groups,
                    w.kind == W4A8Kind::kG128, out, stream);
}

}  // namespace qserve::cuda
