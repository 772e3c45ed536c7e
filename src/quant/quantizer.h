// The offline QoQ quantizer (spec section 6): reads an FP16/BF16/FP32 Llama
// checkpoint, runs calibration sequences through the model block by block,
// applies the enabled transforms, quantizes each block's linear layers and
// writes the quantized checkpoint (docs/quantized-checkpoint.md) one shard per
// block, so peak memory stays near one block in FP32 plus the calibration
// activations [tokens, hidden] (and the FP16 embedding / lm_head).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "quant/llama_weights.h"
#include "quant/precision.h"
#include "quant/quant_linear.h"

namespace qserve::quant {

struct QuantizeOptions {
  Precision precision = Precision::kW4A8KV4;
  int64_t group = 128;             // -1: per channel (W4A8 only)
  bool fold_norms = false;         // implied by rotation
  bool rotate = true;
  bool smooth_attention = true;
  bool smooth_output = true;       // o_proj (via v_proj) and down_proj
  bool smooth_input = false;       // SmoothQuant input smoothing (folded into the norms)
  bool reorder = true;             // g128 only
  bool clip = true;
  bool rotate_values = false;      // Hadamard inside each KV head on v_proj rows / o_proj columns (quant/rotate_value.h)
  bool quantized_stream = false;   // the next block calibrates on this block's quantized output, not the FP one
  bool stream_numerics = false;    // ... computed with the run time's INT8 activations and KV quantization too
  bool gptq = false;               // GPTQ error compensation (quant/gptq.h) after the grid is set
  int64_t gptq_rows = 4096;        // calibration rows kept per linear input for GPTQ's H = X^T X
  bool gptq_act_order = true;      // GPTQ columns in descending H[i, i]
  double gptq_damp = 0.01;         // GPTQ damping, relative to mean(diag H)
  double gptq_row_cap = 0;         // GPTQ row weighting of H (GptqOptions::row_cap; 0: off)
  bool gptq_sequential = false;    // GPTQ stage by stage inside the block on the quantized predecessors (quant/gptq_block.h)
  std::vector<float> gptq_clip_ratios = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f};  // the uniform clips tried by the clip search
  bool gptq_clip_search = false;   // GPTQ-aware clipping: per row, the grid (searched or uniform clip) GPTQ does best with
  bool gptq_fp_target = false;     // GPTQ towards the FP model's outputs (asymmetric calibration, quant/gptq_block.h)
  double smooth_attention_alpha = 0.5;
  bool smooth_attention_mean = false;  // SmoothAttention from mean |K| per channel instead of max |K|
  double smooth_output_alpha = 0.2;
  double smooth_input_alpha = 0.5;
  uint64_t rotation_seed = 0;
  std::vector<std::vector<int32_t>> calibration;  // token sequences (equal lengths)
  std::string calibration_name;                   // recorded in the config
  // Called at each step: (layer index or -1 for the outer weights, number of layers, stage name).
  std::function<void(int64_t, int64_t, const std::string&)> progress;
};

struct LayerReport {
  double key_outlier_before = 0, key_outlier_after = 0;  // max |K| / median |K| over channels
  double mean_clip_ratio = 1;
  double gptq_error_ratio = 0;  // GPTQ / round-to-nearest layer output error on the calibration rows (mean over the 7 linears)
};

struct QuantizeReport {
  std::vector<LayerReport> layers;
  double seconds = 0;
};

// Reads the model shape from a Hugging Face config.json (Error(kCorruptData / kUnsupported)).
LlamaShape llama_shape_from_config(const nlohmann::json& config);

// Writes the quantized checkpoint of `in` into directory out_dir (created).
QuantizeReport quantize_checkpoint(const Checkpoint& in, const std::string& out_dir, const QuantizeOptions& opt);

// The transforms of one block, given its calibration statistics (exposed for tests).
// taps are updated to describe the transformed block's inputs. When `unclipped`
// is given, it receives the block's weights after every transform but clipping
// (the targets of GPTQ, whose grid comes from the clipped weights).
struct BlockTaps;
LayerReport transform_block(const LlamaShape& shape, BlockWeights& w, BlockTaps& taps, const QuantizeOptions& opt,
                            BlockWeights* unclipped = nullptr);

// Quantizes the seven linears of a transformed block (q, k, v, o, gate, up, down), with
// GPTQ when opt.gptq (grid from w, targets from `targets`, H from the taps' rows).
std::vector<QuantizedLinear> quantize_block(const BlockWeights& w, const BlockWeights& targets, const BlockTaps& taps,
                                            const QuantizeOptions& opt, LayerReport* report);

}  // namespace qserve::quant
