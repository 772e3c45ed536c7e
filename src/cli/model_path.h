// Model arguments of the offline commands (quantize, eval): the path to use
// when --model is absent, and tokenizing a text file with a model's tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qserve::cli {

// `arg` itself, or the default model when empty (Error(kNotFound) if there is none).
std::string resolve_model_path(const std::string& arg);

// The token ids of `text` under the tokenizer of `model` (a directory or a GGUF
// file): the text is tokenized once, as a whole; add_special adds what the
// tokenizer's post-processor adds (BOS for Llama), as tokenizer(text) does.
std::vector<int32_t> tokenize_text(const std::string& model, const std::string& text, bool add_special);

}  // namespace qserve::cli
