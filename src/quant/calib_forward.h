// The FP32 forward pass of one Llama block over calibration sequences, with
// taps on the inputs of every linear layer: the statistics QoQ's transforms
// need (spec section 6) and row samples for the clipping search. The
// quantizer runs it block by block: h holds the residual stream of every
// calibration token, the block's output replaces its input.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/llama_weights.h"

namespace qserve::quant {

struct BlockTaps {
  int64_t keep_every = 16;          // row samples: every keep_every-th token
  std::vector<float> max_attn_in;   // [hidden] max |x| of the normed input of q/k/v
  std::vector<float> max_k;         // [kv_dim] max |K| after RoPE (SmoothAttention)
  std::vector<float> max_q;         // [q_dim] max |Q| after RoPE
  std::vector<float> max_o_in;      // [q_dim] max |x| of the attention output (o_proj input)
  std::vector<float> max_mlp_in;    // [hidden] max |x| of the normed input of gate/up
  std::vector<float> max_down_in;   // [intermediate] max |x| of silu(gate) * up
  Matrix attn_in, o_in, mlp_in, down_in;  // [kept rows, dim] sampled inputs of the linears
  std::vector<float> k_abs_sum;     // [kv_dim] sum |K| (for the median-style summaries)
  int64_t tokens = 0;
};

// Run-time numerics the forward can imitate (fake quantization: quantize, then
// dequantize to FP32), so that a calibration stream sees what the W4A8KV4 model computes.
struct ForwardNumerics {
  bool a8 = false;  // per-token INT8 inputs of every linear (spec section 2)
  int kv_bits = 0;  // 4 / 8: K (after RoPE) and V per token and head (spec section 5); 0: FP
};

// Where a forward may stop once the taps it is run for are taken (staged GPTQ).
enum class BlockStop { kEnd, kAfterOIn, kAfterMlpIn, kAfterDownIn };

// h: [n_seq * seqlen, hidden] FP32, the residual stream entering the block;
// replaced by the block's output (unspecified contents when stopped early).
// Each sequence starts at position 0. taps may be null (no statistics).
void block_forward(const LlamaShape& shape, const BlockWeights& w, float* h, int64_t n_seq, int64_t seqlen,
                   BlockTaps* taps, const ForwardNumerics& numerics = {}, BlockStop stop = BlockStop::kEnd);

// Fake quantization of x [rows, n] in place: per-row symmetric INT8 (activations).
void fake_quantize_rows_int8(float* x, int64_t rows, int64_t n);
// Fake quantization of x [rows, heads * head_dim] in place: per row and head, asymmetric
// KV4 / KV8 with fp16 scale and zero (the KV cache's arithmetic, quant/kv_format.h).
void fake_quantize_kv(float* x, int64_t rows, int64_t heads, int64_t head_dim, int bits);

// RMSNorm of rows: y = x / sqrt(mean(x^2) + eps) * gain; x, y [rows, n].
void rms_norm_rows(const float* x, const float* gain, float* y, int64_t rows, int64_t n, double eps);

// Applies RoPE in place to x [seqlen, n_heads * head_dim] for positions 0..seqlen-1.
void apply_rope(const LlamaShape& shape, float* x, int64_t seqlen, int64_t n_heads);

// Full-model logits [seqlen, vocab] of one sequence (tests of the transforms).
std::vector<float> model_logits(const LlamaShape& shape, const OuterWeights& outer,
                                const std::vector<BlockWeights>& blocks, const std::vector<int32_t>& tokens);

}  // namespace qserve::quant
