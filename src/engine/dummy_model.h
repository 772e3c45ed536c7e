// `--load-format dummy`: a LlamaModel of a named shape (engine/dummy_arch.h)
// with random weights (engine/dummy_weights.h) in any precision, as vLLM's
// option of that name, for throughput benchmarks without a checkpoint.
// The block linears are made one at a time from LlamaModel's QuantizedLinearSource
// (q / k / v and gate / up stacked when the backend fuses them)
// and handed to Backend::make_quantized_linear, so host memory holds one
// layer's packed weights beyond what the backend keeps. Embedding, lm_head and
// the norm gains are random float (F16 on the host). No tokenizer: token ids only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/llama_model.h"
#include "engine/precision_choice.h"

namespace qserve {

struct DummyModelOptions {
  std::string arch;             // a name of dummy_arch_names()
  PrecisionChoice precision;    // the block linears' format and the KV cache's
  uint64_t seed = 0;            // same seed, same weights
};

// On options.device (engine/backend_factory.h). Errors: kInvalidArgument (arch), kUnsupported (device).
std::unique_ptr<LlamaModel> load_dummy_model(const DummyModelOptions& dummy, LlamaModelOptions options = {});

}  // namespace qserve
