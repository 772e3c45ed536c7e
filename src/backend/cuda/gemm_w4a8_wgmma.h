// Internal to the W4A8 GEMM: the sm_90a wgmma family's host side (planner
// rules and launch); the public API is gemm_w4a8.h.
#pragma once

#include <cstdint>

#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"

namespace qserve::cuda {

// The cheapest INT8-weight tile for the problem (with the W4 weight scratch;
// gemm_s8.h's plan_s8 drops it for INT8 weights).
W4A8Plan plan_w4a8_wgmma_s8(const DeviceInfo& dev, int64_t m, int64_t n, int64_t k, int force_splits);

// Runs a plan of a wgmma tile (plan.tile >= kW4A8FirstWgmmaTile; not the
// decode kernel, which gemm_w4a8 launches with the mma.sync kernels' parameters).
void gemm_w4a8_wgmma(const W4A8DeviceWeights& w, const W4A8Args& args, const W4A8Plan& plan, void* workspace,
                     cudaStream_t stream);

// The kernel parameters common to every wgmma launch (activations, outputs,
// the plan's grid and workspace) for an n x k weight; checks the plan.
w4a8::wgmma::Params wgmma_params(const W4A8Args& args, const W4A8Plan& plan, void* workspace, int64_t n, int64_t k);

}  // namespace qserve::cuda
