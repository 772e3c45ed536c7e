// CPU reference of the quantized GEMMs: exact INT32 accumulation, then the
// FP32 epilogue of quant/gemm_epilogue.h, rounded once to fp16.
// Y[t, o] = epilogue(sum_i Xq[t, i] * Wq[o, i]); threaded over output rows.
// Layouts: xq [m, k] int8 row-major, s_x / a_sum [m] fp16 bits, y [m, n] fp16
// bits row-major, acc [m, n] int32 row-major. Weights in canonical storage.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/weight_format.h"

namespace qserve::cpu {

// A layer's INT8 weight rows, derived once (the weights do not change between
// calls): W8hat of a g128 layer (level 2 applied), the W4 codes 0..15 of a
// per-channel one, the W8 of W8A8; and the VNNI paths' bias corrections.
struct S8Weights {
  int64_t n = 0, k = 0;
  std::vector<int8_t> q;      // [n, k] row-major
  std::vector<int32_t> corr;  // [n]: 128 * sum_i q[o, i] (gemm_s8s8_s32's +128 bias)
};
S8Weights prepare_s8_weights(std::vector<int8_t> q, int64_t n, int64_t k);
S8Weights prepare_s8_weights(const quant::W4G128Weights& w);
S8Weights prepare_s8_weights(const quant::W4PerChannelWeights& w);
S8Weights prepare_s8_weights(const quant::W8PerChannelWeights& w);

// W4A8 g128: acc = sum_i Xq * W8hat (level-2 dequantized INT8 weights).
// acc_out and y may each be null. The forms with `S8Weights` take the rows
// prepared beforehand (the epilogue's scales still from `w`, whose packed
// codes they do not read); the others derive them on every call. Both give the
// same bits.
void gemm_w4a8_g128(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W4G128Weights& w,
                    int32_t* acc_out, uint16_t* y);
void gemm_w4a8_g128(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W4G128Weights& w,
                    const S8Weights& w8, int32_t* acc_out, uint16_t* y);

// W4A8 per-channel: acc = sum_i Xq * W4 (raw 0..15); zero point through a_sum.
void gemm_w4a8_per_channel(const int8_t* xq, const uint16_t* s_x, const uint16_t* a_sum, int64_t m,
                           const quant::W4PerChannelWeights& w, int32_t* acc_out, uint16_t* y);
void gemm_w4a8_per_channel(const int8_t* xq, const uint16_t* s_x, const uint16_t* a_sum, int64_t m,
                           const quant::W4PerChannelWeights& w, const S8Weights& w4, int32_t* acc_out, uint16_t* y);

// W8A8: acc = sum_i Xq * W8.
void gemm_w8a8(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W8PerChannelWeights& w,
               int32_t* acc_out, uint16_t* y);
void gemm_w8a8(const int8_t* xq, const uint16_t* s_x, int64_t m, const quant::W8PerChannelWeights& w,
               const S8Weights& w8, int32_t* acc_out, uint16_t* y);

// W4A16 (weight-only g128): x [m, k] fp16 bits; FP32 accumulation of
// x * ((q - z) * scale), rounded to fp16.
void gemm_w4a16(const uint16_t* x, int64_t m, const quant::W4A16Weights& w, uint16_t* y);

// W4A16 weights prepared once (gemm_w4a16_prepared.cpp): each code minus its
// zero point (-15..15) and the scales as floats, channel-minor ([k][n] and
// [groups][n]) so that 16 output channels share a vector, each lane summing
// its channel in the reference's order. The same bits as gemm_w4a16.
struct W4A16Prepared {
  int64_t n = 0, k = 0, group = 0;
  std::vector<int8_t> codes;  // [k, n]: q - zero
  std::vector<float> scales;  // [groups, n]
};
W4A16Prepared prepare_w4a16(const quant::W4A16Weights& w);
void gemm_w4a16(const uint16_t* x, int64_t m, const W4A16Prepared& w, uint16_t* y);
// The float sums [m, n] of both forms before their rounding to fp16 (what the
// tests compare bit for bit).
void gemm_w4a16_sums(const uint16_t* x, int64_t m, const quant::W4A16Weights& w, float* sums);
void gemm_w4a16_sums(const uint16_t* x, int64_t m, const W4A16Prepared& w, float* sums);

// The integer core: acc [m, n] = xq [m, k] * wq [n, k]^T (both int8 row-major).
// Runs the fastest path the CPU has (s8_gemm_default_path()); every path gives
// exactly the same INT32 results.
void gemm_s8s8_s32(const int8_t* xq, const int8_t* wq, int64_t m, int64_t n, int64_t k, int32_t* acc);

// Paths of the integer core. kScalar is the reference (plain loops, the oracle);
// the VNNI paths use vpdpbusd (unsigned x signed bytes -> int32): with
// xu = xq + 128 (xq XOR 0x80 as uint8), sum_i xq[i] w[i] = sum_i xu[i] w[i] - 128 sum_i w[i],
// exact in INT32 for k < 65,793.
enum class S8GemmPath { kScalar, kAvxVnni, kAvx512Vnni };
bool s8_gemm_path_supported(S8GemmPath path);  // by this CPU (runtime check)
// The best supported path, unless QSERVE_CPU_GEMM=scalar|avx_vnni|avx512_vnni says otherwise.
S8GemmPath s8_gemm_default_path();
const char* s8_gemm_path_name(S8GemmPath path);
void gemm_s8s8_s32(const int8_t* xq, const int8_t* wq, int64_t m, int64_t n, int64_t k, int32_t* acc, S8GemmPath path);
// The same through prepared rows (w.n x w.k).
void gemm_s8s8_s32(const int8_t* xq, const S8Weights& w, int64_t m, int32_t* acc);
void gemm_s8s8_s32(const int8_t* xq, const S8Weights& w, int64_t m, int32_t* acc, S8GemmPath path);

}  // namespace qserve::cpu
