// The boundary between the W4A8 host code and the decode kernel for m <= 8
// (kernels/gemm_w4a8_gemv.cuh): its parameters and launch. Design:
// docs/gemm-hopper.md, "Decode without shared-memory stages".
#pragma once

#include <cstdint>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace qserve::cuda::w4a8::gemv {

struct Params {
  const uint4* w;          // repacked W4 [ceil(n/128)][k/64][8][32] x 16 B (quant/w4a8_repack.h)
  const uint32_t* level2;  // g128: [ceil(n/128)][groups][8][8]
  const int8_t* x;         // [m, k] row-major, 4-byte aligned (k % 64 == 0)
  const __half* s_x;       // [m]
  const __half* a_sum;     // [m] (per-channel)
  const float* ch_scale;   // [n16 * 16]
  const float* ch_szero;   // [n16 * 16] (per-channel)
  __half* y;               // [m, n]
  int32_t* acc_out;        // [m, n] or null: exact accumulators instead of y
  int m, n, k, groups;
};

// `ctas` CTAs walking the ceil(n / 16) 16-channel tiles (at most three per
// SM are resident), p.m <= 8. `pdl`: programmatic dependent launch (the first
// weights load while the previous kernel ends).
void launch_gemv(bool g128, const Params& p, int ctas, cudaStream_t stream, bool pdl);

}  // namespace qserve::cuda::w4a8::gemv
