// Compute order of the W4A8 weights for the CUDA mma.sync kernels (INT8
// m16n8k32, weights as the A operand: output channels are the MMA's rows).
// Derived from the canonical storage at load time, never stored on disk.
//
// qweight_mma [n/128][k/64][8][32 lanes][16 bytes]: for each block of 128
// output channels and each 64-wide k tile, 8 tiles of 16 channels x 64 inputs
// (4 KB contiguous, what one pipeline stage of a 128-channel CTA reads); in a
// tile, the 16 bytes lane L needs, so one 128-bit load per lane per tile, no
// index math. Tile t (channels 16t..16t+15) of block t / 8 is entry t % 8.
// With g = L / 4 and q = L % 4, byte (4w + b), w = 0..3, b = 0..3 holds
//   low nibble:  W4[16 * n16 + g    ][64 * kt + 16 w + 4 q + b]
//   high nibble: W4[16 * n16 + g + 8][64 * kt + 16 w + 4 q + b]
// so that `word & 0x0f0f0f0f` is MMA A-register 2w (rows g) and
// `(word >> 4) & 0x0f0f0f0f` is A-register 2w + 1 (rows g + 8), registers 0-3
// forming the k-step 0..31 fragment and 4-7 the k-step 32..63 fragment.
// Channels n..128 * ceil(n / 128) are padding (W4 = 0).
//
// g128 level-2 parameters, scale_mma [ceil(n / 128)][groups][8 tiles][8]
// uint32, block-major like the weights: the 8 x 8 words of one 128-channel
// block and one group are 256 contiguous bytes (one copy per block per k
// stage for the sm_90a kernels). Word g of 16-channel tile t holds
//   s2(row g) | szero(row g) << 8 | s2(row g + 8) << 16 | szero(row g + 8) << 24
// with szero = low byte of -z * s2 (padding rows and tiles: s2 = 1, szero = 0);
// level2_word_offset(t, group, groups) is the index of its word 0.
#pragma once

#include <cstdint>
#include <vector>

#include "core/host_device.h"
#include "quant/weight_format.h"

namespace qserve::quant {

QS_HOST_DEVICE int64_t level2_word_offset(int64_t t16, int64_t group, int64_t groups) {
  return ((t16 >> 3) * groups + group) * 64 + (t16 & 7) * 8;
}

inline constexpr int kMmaTileK = 64;     // input channels per repacked tile
inline constexpr int kMmaTileRows = 16;  // output channels per repacked tile
inline constexpr int kMmaBlockTiles = 8;  // tiles per contiguous block (128 channels)

inline int64_t padded_rows(int64_t n) { return (n + kMmaTileRows - 1) / kMmaTileRows * kMmaTileRows; }

// 128-channel blocks of the repacked weights, and the bytes of one.
inline int64_t repacked_blocks(int64_t n) { return (n + kMmaTileRows * kMmaBlockTiles - 1) / (kMmaTileRows * kMmaBlockTiles); }
inline int64_t repacked_block_bytes(int64_t k) { return k / kMmaTileK * kMmaBlockTiles * 512; }

// Byte offset of (tile t, k tile kt, lane) in the repacked weights.
inline int64_t repacked_offset(int64_t t, int64_t kt, int lane, int64_t k) {
  return (((t / kMmaBlockTiles) * (k / kMmaTileK) + kt) * kMmaBlockTiles + t % kMmaBlockTiles) * 512 + lane * 16;
}
// g128 level 2 as the CUDA kernels compute it (docs/gemm-hopper.md): byte b
// of w4x4 * s2 + C, with C = (128 - z s2) * 0x01010101 (mod 2^32), is
// (w4_b - z) s2 + 128, in [0, 255] under the protective range, so the 32-bit
// multiply-add has no carry between bytes: the weights biased by 128, as
// unsigned bytes (level2_dequant_biased4: one instruction per 4 weights; the
// sm_90a kernels multiply them as u8 and subtract 128 * sum_i Xq[t, i] from
// each token's accumulators). XOR 0x80 per byte gives the INT8 weights (two's
// complement, level2_dequant_offset4), the same bytes as level2_dequant_wrap4.
// C is one multiply-add from the stored byte zs2 = z s2.
QS_HOST_DEVICE uint32_t level2_offset_constant(uint32_t zs2) { return 0x80808080u - zs2 * 0x01010101u; }
QS_HOST_DEVICE uint32_t level2_dequant_biased4(uint32_t w4x4, uint32_t s2, uint32_t c) { return w4x4 * s2 + c; }
QS_HOST_DEVICE uint32_t level2_dequant_offset4(uint32_t w4x4, uint32_t s2, uint32_t c) {
  return level2_dequant_biased4(w4x4, s2, c) ^ 0x80808080u;
}
// What the biased weights add to an accumulator: 128 per unit of the token's
// code sum (the kernels subtract it: exact INT32).
inline constexpr int32_t kLevel2Bias = 128;

// qweight [n, k/2] canonical -> [n/128][k/64][8][32][16] bytes; k % 64 == 0.
std::vector<uint8_t> repack_w4_mma(const uint8_t* qweight, int64_t n, int64_t k);
// The same for the 128-channel blocks [block_begin, block_end) only, written
// to out ((block_end - block_begin) * repacked_block_bytes(k) bytes, every one
// written): a layer repacked piece by piece into a reused buffer. On the
// host's threads (not from inside a ThreadPool::parallel_for).
void repack_w4_mma_blocks(const uint8_t* qweight, int64_t n, int64_t k, int64_t block_begin, int64_t block_end,
                          uint8_t* out);
// The inverse (for tests): W4 value of (o, i) read back from the repacked layout.
uint8_t repacked_w4_at(const std::vector<uint8_t>& packed, int64_t k, int64_t o, int64_t i);
// s2 / zero [n, groups] -> [ceil(n / 128)][groups][8][8] uint32 as above.
std::vector<uint32_t> repack_level2_mma(const uint8_t* s2, const uint8_t* zero, int64_t n, int64_t groups);

}  // namespace qserve::quant
