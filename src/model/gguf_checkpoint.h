// A GGUF file seen as a Hugging Face checkpoint: tensors dequantized to F32
// under Hugging Face names, a synthesized config.json, and the tokenizer in
// the metadata exported as tokenizer.json / tokenizer_config.json /
// generation_config.json.
#pragma once

#include <memory>
#include <string>

#include "model/checkpoint.h"

namespace qserve {

std::shared_ptr<Checkpoint> open_gguf_checkpoint(const std::string& path);

}  // namespace qserve
