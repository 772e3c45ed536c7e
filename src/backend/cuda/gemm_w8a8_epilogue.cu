// The W8A8 epilogue after cuBLASLt INT8: Y = (s_x[t] * s_w[o]) * acc -> fp16.
#include "backend/cuda/gemm_w8a8_epilogue.h"

#include "backend/cuda/cuda_check.h"
#include "quant/gemm_epilogue.h"

namespace qserve::cuda {
namespace {

// One thread per 4 outputs of a row; n % 4 == 0 is not assumed.
__global__ void w8a8_epilogue_kernel(const int32_t* __restrict__ acc, const __half* __restrict__ s_x,
                                     const float* __restrict__ s_w, __half* __restrict__ y, int m, int n) {
  const int t = blockIdx.y;
  const int o0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (t >= m || o0 >= n) return;
  const float sx = __half2float(s_x[t]);
  const size_t row = static_cast<size_t>(t) * n;
  for (int o = o0; o < min(n, o0 + 4); ++o) y[row + o] = __float2half_rn(quant::epilogue_w8a8(acc[row + o], sx, s_w[o]));
}

}  // namespace

void launch_w8a8_epilogue(const int32_t* acc, const __half* s_x, const float* s_w, __half* y, int64_t m, int64_t n,
                          cudaStream_t stream) {
  const int threads = 256;
  const dim3 grid(static_cast<unsigned>((n + 4 * threads - 1) / (4 * threads)), static_cast<unsigned>(m));
  w8a8_epilogue_kernel<<<grid, threads, 0, stream>>>(acc, s_x, s_w, y, static_cast<int>(m), static_cast<int>(n));
  QS_CUDA_CHECK_LAUNCH();
}

}  // namespace qserve::cuda
