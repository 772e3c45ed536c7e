// Loading a quantized (QoQ) checkpoint (docs/quantized-checkpoint.md) into the
// Llama forward pass on options.device (engine/backend_factory.h): the block linears
// become the backend's quantized linears (Backend::make_quantized_linear), the
// KV cache KV4 / KV8 per the precision; embedding, norms and lm_head
// stay float. LlamaModel::load calls this for checkpoints whose config.json
// holds a "quantization_config" with method "qoq".
#pragma once

#include <memory>

#include "engine/llama_model.h"

namespace qserve {

// Validates the whole checkpoint first (Error kCorruptData / kNotFound naming the tensor).
std::unique_ptr<LlamaModel> load_qoq_model(const Checkpoint& checkpoint, LlamaModelOptions options = {});

}  // namespace qserve
