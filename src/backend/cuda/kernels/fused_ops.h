// The memory-bound kernels around the W4A8 GEMMs (CUDA twins of
// backend/cpu/fused_ops.h): each reads fp16 activations once and writes what
// the next GEMM consumes (per-token INT8 + fp16 scale [+ fp16 activation sum],
// qoq-spec.md section 2), in one pass per row.
//
// Rows of `cols` fp16 values, cols a multiple of 8 and at most 32768; all
// pointers device memory, 16-byte aligned rows. Return cudaErrorInvalidValue
// for a shape they do not take, else the launch status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cpu/fused_ops.h"  // Int8Rows

namespace qserve::cuda {

// if residual: h = fp16(x + residual), residual = h; else h = x.
// y = h * rsqrt(mean(h^2) + eps) * gamma, quantized per row into `out`.
// Under programmatic dependent launch gamma (a weight) is read before the
// wait for the previous kernel of the stream: that kernel must not write it.
cudaError_t rmsnorm_quant(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int rows, int cols, float eps,
                          const Int8Rows& out, cudaStream_t stream);
// The same norm with an fp16 output (final norm).
cudaError_t rmsnorm(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int rows, int cols, float eps,
                    uint16_t* out, cudaStream_t stream);
// y = silu(gate) * up, quantized per row; gate, up: rows of `stride` elements.
cudaError_t silu_mul_quant(const uint16_t* gate, const uint16_t* up, int64_t stride, int rows, int cols,
                           const Int8Rows& out, cudaStream_t stream);
// Quantization (+ sum) of x [rows, cols] (before o_proj).
cudaError_t quantize_int8(const uint16_t* x, int rows, int cols, const Int8Rows& out, cudaStream_t stream);
// out[r] = table[ids[r]]: table [vocab, cols], out [rows, cols]; ids outside
// [0, vocab) give a zero row (the host validates ids; the kernel never reads
// out of bounds).
cudaError_t embedding_gather(const uint16_t* table, int64_t vocab, const int32_t* ids, int rows, int cols,
                             uint16_t* out, cudaStream_t stream);
// dst = src, `bytes` a multiple of 16 (the bandwidth reference of the benchmarks).
cudaError_t copy_bytes(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace qserve::cuda
