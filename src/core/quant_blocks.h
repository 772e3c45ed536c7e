// The GGUF (ggml) block formats as tensor element types (core/dtype.h) and
// their dequantization to F32, bit-exact with ggml's dequantize_row_* (and
// with the Python `gguf.quants.dequantize`). Block layouts (ggml-common.h);
// `d` / `m` / `dmin` are fp16, codes little-endian:
//   Q4_0 [32] 18 B:  d, qs[16]            x = (nibble - 8) * d      low nibbles = elements 0..15
//   Q4_1 [32] 20 B:  d, m, qs[16]         x = nibble * d + m
//   Q5_0 [32] 22 B:  d, qh[4], qs[16]     x = ((nibble | highbit << 4) - 16) * d
//   Q5_1 [32] 24 B:  d, m, qh[4], qs[16]  x = (nibble | highbit << 4) * d + m
//   Q8_0 [32] 34 B:  d, qs[32] int8       x = q * d
//   Q4_K [256] 144 B: d, dmin, scales[12] (8 x 6-bit scale/min pairs), qs[128]
//                     x = (d * sc) * nibble - dmin * m per 32-element sub-block
//   Q6_K [256] 210 B: ql[128], qh[64], scales[16] int8, d
//                     x = (d * sc) * (6-bit code - 32) per 16-element sub-block
// Each product and sum is one rounded float operation in the order written
// (quant_blocks.cpp is built without contraction into fused multiply-adds):
// the CPU matmul's block loaders (backend/cpu/matmul_blocks.inc) repeat the
// same operations in vector lanes and give the same floats.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace qserve {

// Dequantizes `n` elements (a whole number of blocks, QS_CHECK) of the block
// format `dtype` from `src` into `dst`.
void dequantize_blocks(DType dtype, const void* src, float* dst, int64_t n);

// The j-th 6-bit (scale, min) pair of a Q4_K block's 12 scale bytes `q`.
inline void q4_k_scale_min(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace qserve
