// FP32 working copies of Llama-family weights for the offline quantizer: the
// transforms of QoQ (spec section 6) edit these in place, one block at a time,
// so that only one block is held in FP32 (plus the embedding and lm_head).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qserve::quant {

// The shapes and constants the quantizer needs (read from the HF config.json).
struct LlamaShape {
  int64_t hidden = 0;        // d_model
  int64_t intermediate = 0;  // MLP width
  int64_t n_heads = 0;       // query heads
  int64_t n_kv_heads = 0;    // key/value heads (GQA)
  int64_t head_dim = 0;
  int64_t vocab = 0;
  int64_t n_layers = 0;
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  bool rope_interleaved = false;  // true: pairs (2j, 2j+1); false: rotate-half (j, j + d/2)
  bool tie_embeddings = false;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  int64_t group() const { return n_heads / n_kv_heads; }  // query heads per KV head
};

// A row-major FP32 matrix [rows, cols]; for a linear layer [out, in] (Y = X W^T).
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;

  Matrix() = default;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.0f) {}
  float* row(int64_t r) { return data.data() + r * cols; }
  const float* row(int64_t r) const { return data.data() + r * cols; }
  float& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * cols + c)]; }
  float at(int64_t r, int64_t c) const { return data[static_cast<size_t>(r * cols + c)]; }
};

// One decoder block. Linear weights are [out, in].
struct BlockWeights {
  Matrix q, k, v;            // [q_dim, hidden], [kv_dim, hidden] x2
  Matrix o;                  // [hidden, q_dim]
  Matrix gate, up;           // [intermediate, hidden]
  Matrix down;               // [hidden, intermediate]
  std::vector<float> attn_norm;  // [hidden] RMSNorm gain before q/k/v (all ones once folded)
  std::vector<float> mlp_norm;   // [hidden] RMSNorm gain before gate/up
};

// The parts outside the blocks.
struct OuterWeights {
  Matrix embed;                   // [vocab, hidden]
  std::vector<float> final_norm;  // [hidden]
  Matrix lm_head;                 // [vocab, hidden]; a copy of embed when tied (untied by the transforms)
};

}  // namespace qserve::quant
