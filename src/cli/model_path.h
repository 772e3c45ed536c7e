// Tokenizing a text file with a model's tokenizer, for the offline commands
// (quantize: calibration text; eval: the evaluated text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qserve::cli {

// The token ids of `text` under the tokenizer of the model directory `model`:
// the text is tokenized once, as a whole; add_special adds what the
// tokenizer's post-processor adds (BOS for Llama), as tokenizer(text) does.
std::vector<int32_t> tokenize_text(const std::string& model, const std::string& text, bool add_special);

}  // namespace qserve::cli
