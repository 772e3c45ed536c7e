// CPU reference for the memory-bound ops around the W4A8 GEMMs: each one
// reads FP16 activations and writes what the next GEMM consumes, per-token
// INT8 (qoq-spec.md section 2: int8 codes, fp16 scale, fp16 activation sum).
// The CUDA kernels (backend/cuda/kernels/fused_ops.h) are tested against these.
#pragma once

#include <cstdint>

namespace qserve {

// Per-token INT8 output of a fused op.
struct Int8Rows {
  int8_t* q = nullptr;        // [rows, cols]
  uint16_t* scale = nullptr;  // [rows] fp16 s_x
  uint16_t* sum = nullptr;    // [rows] fp16 a_sum = s_x * sum(q), or null (per-channel W4 layers)
  int32_t* code_sum = nullptr;  // [rows] sum(q), exact, or null (g128 W4 on sm_90a: the biased weights' correction)
};

// RMSNorm with the residual add fused in, then INT8 quantization:
//   if residual: h = fp16(x + residual); residual = h  (the updated residual stream)
//   else:        h = x
//   y = h * rsqrt(mean(h^2) + eps) * gamma (f32), quantized per row.
//   x, residual: [rows, cols] fp16; gamma: [cols] fp16
void rmsnorm_quant_cpu(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int rows, int cols,
                       float eps, const Int8Rows& out);

// The same norm with an fp16 output (final norm before lm_head).
void rmsnorm_cpu(const uint16_t* x, uint16_t* residual, const uint16_t* gamma, int rows, int cols, float eps,
                 uint16_t* out);

// y = silu(gate) * up, quantized per row. gate, up: [rows, cols] fp16 with
// row strides in elements (a fused gate_up GEMM output [rows, 2 cols] is
// gate = p, up = p + cols, both with stride 2 cols).
void silu_mul_quant_cpu(const uint16_t* gate, const uint16_t* up, int64_t stride, int rows, int cols,
                        const Int8Rows& out);

// Quantization (+ sum) of an fp16 tensor (the attention output before o_proj).
void quantize_int8_cpu(const uint16_t* x, int rows, int cols, const Int8Rows& out);

// out[t] = table[ids[t]]; table: [vocab, cols] fp16, out: [rows, cols] fp16.
void embedding_gather_cpu(const uint16_t* table, int64_t vocab, const int32_t* ids, int rows, int cols,
                          uint16_t* out);

}  // namespace qserve
