#include "engine/dummy_arch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace qserve {
namespace {

struct ArchRow {
  const char* name;
  int64_t hidden, layers, heads, kv_heads, intermediate, vocab;
  double rope_theta;
  int64_t context;
  int64_t bos, eos;
};

// Values from the models' config.json on the Hugging Face hub (meta-llama/*).
// The Llama-3.2 models tie the embeddings to lm_head; here lm_head is a
// matrix of its own (the same bytes read per step) and the context is cut to
// 8192 (the real 131072 with llama3 rope scaling changes no shape).
constexpr ArchRow kArchs[] = {
    {"llama-2-7b", 4096, 32, 32, 32, 11008, 32000, 10000.0, 4096, 1, 2},
    {"llama-2-13b", 5120, 40, 40, 40, 13824, 32000, 10000.0, 4096, 1, 2},
    {"llama-2-70b", 8192, 80, 64, 8, 28672, 32000, 10000.0, 4096, 1, 2},
    {"llama-3-8b", 4096, 32, 32, 8, 14336, 128256, 500000.0, 8192, 128000, 128001},
    {"llama-3-70b", 8192, 80, 64, 8, 28672, 128256, 500000.0, 8192, 128000, 128001},
    {"llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256, 500000.0, 8192, 128000, 128001},  // head_dim 64
    {"llama-3.2-3b", 3072, 28, 24, 8, 8192, 128256, 500000.0, 8192, 128000, 128001},
    {"tiny", 256, 2, 2, 1, 512, 1024, 10000.0, 2048, 1, 2},
    {"tiny-odd", 200, 3, 5, 1, 328, 999, 10000.0, 512, 1, 2},
};

}  // namespace

std::vector<std::string> dummy_arch_names() {
  std::vector<std::string> names;
  for (const ArchRow& a : kArchs) names.emplace_back(a.name);
  return names;
}

nlohmann::json dummy_arch_config_json(const std::string& arch) {
  for (const ArchRow& a : kArchs) {
    if (arch != a.name) continue;
    return nlohmann::json{
        {"architectures", {"LlamaForCausalLM"}},
        {"model_type", "llama"},
        {"hidden_size", a.hidden},
        {"intermediate_size", a.intermediate},
        {"num_hidden_layers", a.layers},
        {"num_attention_heads", a.heads},
        {"num_key_value_heads", a.kv_heads},
        {"head_dim", a.hidden / a.heads},
        {"vocab_size", a.vocab},
        {"max_position_embeddings", a.context},
        {"rope_theta", a.rope_theta},
        {"rms_norm_eps", 1e-5},
        {"hidden_act", "silu"},
        {"tie_word_embeddings", false},
        {"attention_bias", false},
        {"mlp_bias", false},
        {"bos_token_id", a.bos},
        {"eos_token_id", a.eos},
        {"torch_dtype", "float16"},
    };
  }
  fail(ErrorCode::kInvalidArgument, "unknown --arch '{}' (choose {})", arch, fmt::join(dummy_arch_names(), ", "));
}

ModelConfig dummy_arch_config(const std::string& arch) {
  ModelConfig c = ModelConfig::from_json(dummy_arch_config_json(arch));
  c.eos_token_ids.clear();
  return c;
}

}  // namespace qserve
