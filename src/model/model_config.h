// The model hyper-parameters of a Llama-family checkpoint, read from a
// Hugging Face config.json (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM). Everything the forward pass needs, validated once here so
// that later code can rely on it (heads divide, head_dim > 0, ...).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace qserve {

enum class Architecture { kLlama, kMistral, kQwen2 };

// "LlamaForCausalLM", ...
const char* architecture_name(Architecture arch);

// How RoPE frequencies are adjusted for long contexts. Only "llama3" (Llama
// 3.1 / 3.2) is implemented; "default" / absent is kNone.
struct RopeScaling {
  enum class Type { kNone, kLlama3 };
  Type type = Type::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // key/value heads (GQA: num_heads % num_kv_heads == 0)
  int64_t head_dim = 0;      // explicit in config.json, else hidden_size / num_heads
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 2048;
  bool attention_bias = false;  // q/k/v (and, for Llama's flag, o) projections have a bias
  bool o_proj_bias = false;     // Llama's attention_bias covers o_proj too; Qwen2's does not
  bool mlp_bias = false;        // Llama's mlp_bias flag: gate/up/down have a bias
  // Keys older than this many positions are masked (Mistral; Qwen2 with
  // use_sliding_window). Absent = full causal attention.
  std::optional<int64_t> sliding_window;
  std::vector<int64_t> bos_token_ids;  // usually one id
  std::vector<int64_t> eos_token_ids;  // Llama 3 lists several
  std::string torch_dtype;             // informative ("bfloat16", ...)

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t group_size() const { return num_heads / num_kv_heads; }  // query heads per KV head

  // Parses and validates; throws Error (kUnsupported for an unknown
  // architecture or rope type, kCorruptData for missing / inconsistent fields).
  static ModelConfig from_json(const nlohmann::json& config);
  // Reads `path` (a config.json file or a directory that holds one).
  static ModelConfig from_file(const std::string& path);

  // Checks the invariants listed above; from_json calls it.
  void validate() const;
  // One line for logs: "LlamaForCausalLM: 30 layers, hidden 576, 9/3 heads x 64, vocab 49152".
  std::string summary() const;
};

}  // namespace qserve
