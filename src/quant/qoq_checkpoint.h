// The quantized checkpoint (docs/quantized-checkpoint.md): a Hugging Face
// style directory with config.json (+ a "quantization_config" block),
// model-NNNNN-of-MMMMM.safetensors shards (one per block, then one for the
// embedding / final norm / lm_head) with model.safetensors.index.json, and the
// tokenizer files. This file writes it and reads it back with validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "model/checkpoint.h"
#include "quant/llama_weights.h"
#include "quant/precision.h"
#include "quant/quant_linear.h"

namespace qserve::quant {

// The "quantization_config" block.
struct QoqConfig {
  Precision precision = Precision::kW4A8KV4;
  WeightFormat format = WeightFormat::kW4G128;
  int64_t group = 128;  // -1: per channel
  bool fold_norms = false;
  std::string rotation;  // empty: not rotated; else the construction (quant/hadamard.h)
  double smooth_attention_alpha = 0, smooth_output_alpha = 0, smooth_input_alpha = 0;  // 0: off
  bool reorder = false, clip = false;
  bool gptq = false;  // GPTQ error compensation chose the codes (quant/gptq.h)
  bool gptq_act_order = false;  // ... in descending H[i, i] order
  bool gptq_sequential = false; // ... stage by stage inside each block on the quantized predecessors
  std::vector<float> gptq_clip_ratios;  // ... its uniform clips
  bool gptq_clip_search = false; // ... per row on the grid (searched or uniform clip) it does best with
  bool gptq_fp_target = false;  // ... towards the FP model's outputs (asymmetric calibration)
  bool smooth_attention_mean = false;  // SmoothAttention from mean |K| (not max |K|)
  bool rotate_values = false;   // Hadamard inside each KV head on v/o (quant/rotate_value.h)
  bool quantized_stream = false;  // blocks calibrated on the previous blocks' quantized outputs
  bool stream_numerics = false;   // ... with INT8 activations and the KV quantization simulated
  std::string calibration;
  int64_t calibration_samples = 0, calibration_seqlen = 0;
};

nlohmann::json qoq_config_to_json(const QoqConfig& c);
// Error(kCorruptData) naming the field when the block is malformed.
QoqConfig qoq_config_from_json(const nlohmann::json& j);
// True when config.json carries a quantization_config with method "qoq".
bool is_qoq_checkpoint(const nlohmann::json& config);

class QoqCheckpointWriter {
 public:
  QoqCheckpointWriter(std::string dir, int64_t num_shards);
  // Quantizes and writes block l's shard: the seven linears + the two norm gains.
  void add_block(int64_t l, const BlockWeights& w, WeightFormat format, int64_t group);
  // The same with the seven linears already quantized (q, k, v, o, gate, up, down; e.g. by GPTQ);
  // w supplies the two norm gains.
  void add_quantized_block(int64_t l, const std::vector<QuantizedLinear>& linears, const BlockWeights& w);
  // The last shard: embed [vocab, hidden] f16, final_norm [hidden] f16, lm_head (empty when tied).
  void add_outer(const Tensor& embed, const Tensor& final_norm, const Tensor& lm_head);
  // Writes model.safetensors.index.json and config.json.
  void finish(const nlohmann::json& config);

 private:
  std::string shard_name(int64_t i) const;
  std::string dir_;
  int64_t num_shards_;
  int64_t next_shard_ = 0;
  nlohmann::json weight_map_ = nlohmann::json::object();
  uint64_t total_bytes_ = 0;
};

// The names of a linear's tensors ("<prefix>.qweight", ...) for a format.
std::vector<std::string> linear_tensor_names(WeightFormat format);

// One block read back from a quantized checkpoint.
struct QuantizedBlock {
  QuantizedLinear q, k, v, o, gate, up, down;
  std::vector<float> attn_norm, mlp_norm;  // [hidden]
};

// Reads and validates block l (dtypes, shapes, value ranges of s2 / zero)
// against the model shape; Error(kCorruptData / kNotFound) naming the tensor.
QuantizedBlock load_quantized_block(const Checkpoint& ckpt, const QoqConfig& qc, const LlamaShape& shape, int64_t l);
// One linear: prefix "model.layers.3.self_attn.q_proj", expected [n, k].
QuantizedLinear load_quantized_linear(const Checkpoint& ckpt, const QoqConfig& qc, const std::string& prefix,
                                      int64_t n, int64_t k);

}  // namespace qserve::quant
