// The small elementwise kernels of the CUDA model backend that the kernel
// families (fused_ops, attention, GEMMs) do not cover: the residual add, the
// bias of a float linear, SiLU * mul with an fp16 output (the float
// precisions' MLP). fp16 in and out, f32 arithmetic, one rounding per output.
// All pointers device memory; launches on `stream`, no synchronization.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace qserve::cuda {

// x[i] = fp16(x[i] + y[i]) for i < n.
cudaError_t add_f16(uint16_t* x, const uint16_t* y, int64_t n, cudaStream_t stream);
// y[r, c] = fp16(y[r, c] + bias[c]): y [rows, cols], bias [cols].
cudaError_t add_bias_f16(uint16_t* y, const uint16_t* bias, int64_t rows, int64_t cols, cudaStream_t stream);
// out[r, c] = fp16(silu(gate[r * stride + c]) * up[r * stride + c]): out [rows, cols]
// contiguous, gate and up rows `stride` >= cols apart (cols for separate
// tensors, 2 * cols for one gate|up GEMM output with up = gate + cols).
cudaError_t silu_mul_f16(const uint16_t* gate, const uint16_t* up, int64_t stride, int64_t rows, int64_t cols,
                         uint16_t* out, cudaStream_t stream);

// Zeroes `num_pages` pages (ids in pages[], device) of `num_pools` pools:
// pool i starts at pools[i] (device array of pointers); pages of page_bytes
// bytes, a multiple of 16.
cudaError_t zero_pages(uint8_t* const* pools, int num_pools, const int32_t* pages, int num_pages, int64_t page_bytes,
                       cudaStream_t stream);
// out[i] = float(in[i]) for i < n (exact).
cudaError_t f16_to_f32(const uint16_t* in, float* out, int64_t n, cudaStream_t stream);

}  // namespace qserve::cuda
