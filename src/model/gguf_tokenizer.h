// The tokenizer stored in a GGUF's metadata, exported as Hugging Face files:
//   tokenizer.ggml.model "gpt2"  -> byte-level BPE (tokens, merges, token_type;
//                                   tokenizer.ggml.pre picks the pre-tokenizer)
//   tokenizer.ggml.model "llama" -> SentencePiece-style BPE (tokens + scores +
//                                   types; merges rebuilt from the scores, byte fallback)
// Token types (llama.cpp): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
#pragma once

#include <nlohmann/json.hpp>

#include "model/gguf.h"

namespace qserve {

// tokenizer.json content. Error(kUnsupported) for a tokenizer model or
// pre-tokenizer name this exporter does not know; Error(kCorruptData) for
// inconsistent metadata (ids out of range, missing arrays).
nlohmann::json gguf_tokenizer_json(const GgufFile& gguf);
// tokenizer_config.json: chat template, bos/eos/unk/pad tokens, add_bos_token.
nlohmann::json gguf_tokenizer_config(const GgufFile& gguf);
// generation_config.json: bos_token_id, eos_token_id (a list: every token that ends a turn).
nlohmann::json gguf_generation_config(const GgufFile& gguf);
// The ids that end generation (used for config and generation_config).
std::vector<int64_t> gguf_eos_token_ids(const GgufFile& gguf);

}  // namespace qserve
