#include "model/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace qserve {
namespace {

using nlohmann::json;

constexpr const char* kSupported = "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM";

bool present(const json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

int64_t get_int(const json& j, const char* key) {
  if (!present(j, key)) fail(ErrorCode::kCorruptData, "config.json: missing field \"{}\"", key);
  const json& v = j.at(key);
  if (!v.is_number_integer()) fail(ErrorCode::kCorruptData, "config.json: \"{}\" must be an integer, got {}", key, v.dump());
  return v.get<int64_t>();
}

int64_t get_int_or(const json& j, const char* key, int64_t fallback) { return present(j, key) ? get_int(j, key) : fallback; }

double get_number(const json& j, const char* key, const char* where = "config.json") {
  if (!present(j, key)) fail(ErrorCode::kCorruptData, "{}: missing field \"{}\"", where, key);
  const json& v = j.at(key);
  if (!v.is_number()) fail(ErrorCode::kCorruptData, "{}: \"{}\" must be a number, got {}", where, key, v.dump());
  return v.get<double>();
}

double get_number_or(const json& j, const char* key, double fallback) { return present(j, key) ? get_number(j, key) : fallback; }

bool get_bool_or(const json& j, const char* key, bool fallback) {
  if (!present(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_boolean()) fail(ErrorCode::kCorruptData, "config.json: \"{}\" must be true or false, got {}", key, v.dump());
  return v.get<bool>();
}

// bos/eos ids: an integer, a list of integers, or null.
std::vector<int64_t> get_ids(const json& j, const char* key) {
  std::vector<int64_t> ids;
  if (!present(j, key)) return ids;
  const json& v = j.at(key);
  if (v.is_number_integer()) {
    ids.push_back(v.get<int64_t>());
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(ErrorCode::kCorruptData, "config.json: \"{}\" must hold integers, got {}", key, v.dump());
      ids.push_back(e.get<int64_t>());
    }
  } else {
    fail(ErrorCode::kCorruptData, "config.json: \"{}\" must be an integer or a list, got {}", key, v.dump());
  }
  return ids;
}

Architecture parse_architecture(const json& j) {
  std::string name;
  if (present(j, "architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.empty() || !a.at(0).is_string())
      fail(ErrorCode::kCorruptData, "config.json: \"architectures\" must be a non-empty list of names, got {}", a.dump());
    if (a.size() > 1) fail(ErrorCode::kUnsupported, "config.json lists several architectures {}; supported: one of {}", a.dump(), kSupported);
    name = a.at(0).get<std::string>();
  } else if (present(j, "model_type") && j.at("model_type").is_string()) {
    // save_pretrained of a bare config leaves "architectures" null.
    const std::string type = j.at("model_type").get<std::string>();
    if (type == "llama") name = "LlamaForCausalLM";
    else if (type == "mistral") name = "MistralForCausalLM";
    else if (type == "qwen2") name = "Qwen2ForCausalLM";
    else fail(ErrorCode::kUnsupported, "unsupported model_type {}; supported: {}", type, kSupported);
  } else {
    fail(ErrorCode::kCorruptData, "config.json: neither \"architectures\" nor \"model_type\" is given");
  }
  if (name == "LlamaForCausalLM") return Architecture::kLlama;
  if (name == "MistralForCausalLM") return Architecture::kMistral;
  if (name == "Qwen2ForCausalLM") return Architecture::kQwen2;
  fail(ErrorCode::kUnsupported, "unsupported architecture {}; supported: {}", name, kSupported);
}

// transformers >= 5 writes "rope_parameters" {rope_type, rope_theta, factor, ...};
// older versions write "rope_theta" and "rope_scaling" {type | rope_type, factor, ...}.
void parse_rope(const json& j, ModelConfig& c) {
  json params = json::object();
  if (present(j, "rope_parameters")) {
    params = j.at("rope_parameters");
    if (!params.is_object()) fail(ErrorCode::kCorruptData, "config.json: \"rope_parameters\" must be an object, got {}", params.dump());
  } else if (present(j, "rope_scaling")) {
    params = j.at("rope_scaling");
    if (!params.is_object()) fail(ErrorCode::kCorruptData, "config.json: \"rope_scaling\" must be an object, got {}", params.dump());
  }
  c.rope_theta = static_cast<float>(present(params, "rope_theta") ? get_number(params, "rope_theta", "config.json rope_parameters")
                                                                  : get_number_or(j, "rope_theta", 10000.0));
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (present(params, key)) {
      if (!params.at(key).is_string()) fail(ErrorCode::kCorruptData, "config.json: rope \"{}\" must be a string", key);
      type = params.at(key).get<std::string>();
      break;
    }
  }
  if (type == "default") {
    c.rope_scaling = RopeScaling{};
  } else if (type == "llama3") {
    const char* where = "config.json rope_scaling (llama3)";
    RopeScaling& s = c.rope_scaling;
    s.type = RopeScaling::Type::kLlama3;
    s.factor = static_cast<float>(get_number(params, "factor", where));
    s.low_freq_factor = static_cast<float>(get_number(params, "low_freq_factor", where));
    s.high_freq_factor = static_cast<float>(get_number(params, "high_freq_factor", where));
    const double orig = get_number(params, "original_max_position_embeddings", where);
    s.original_max_position_embeddings = static_cast<int64_t>(orig);
    if (!(s.factor >= 1.0f) || !(s.low_freq_factor > 0.0f) || !(s.high_freq_factor > s.low_freq_factor) || orig < 1)
      fail(ErrorCode::kCorruptData,
           "{}: need factor >= 1, 0 < low_freq_factor < high_freq_factor, original_max_position_embeddings >= 1; got {}", where,
           params.dump());
  } else {
    fail(ErrorCode::kUnsupported, "unsupported rope scaling type {}; supported: default, llama3", type);
  }
}

}  // namespace

const char* architecture_name(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama: return "LlamaForCausalLM";
    case Architecture::kMistral: return "MistralForCausalLM";
    case Architecture::kQwen2: return "Qwen2ForCausalLM";
  }
  return "?";
}

ModelConfig ModelConfig::from_json(const json& j) {
  if (!j.is_object()) fail(ErrorCode::kCorruptData, "config.json: expected a JSON object");
  ModelConfig c;
  c.architecture = parse_architecture(j);
  c.vocab_size = get_int(j, "vocab_size");
  c.hidden_size = get_int(j, "hidden_size");
  c.intermediate_size = get_int(j, "intermediate_size");
  c.num_layers = get_int(j, "num_hidden_layers");
  c.num_heads = get_int(j, "num_attention_heads");
  c.num_kv_heads = get_int_or(j, "num_key_value_heads", c.num_heads);
  if (c.num_heads <= 0) fail(ErrorCode::kCorruptData, "config.json: num_attention_heads must be positive, got {}", c.num_heads);
  if (present(j, "head_dim")) {
    c.head_dim = get_int(j, "head_dim");
  } else {
    if (c.hidden_size % c.num_heads != 0)
      fail(ErrorCode::kCorruptData, "config.json: hidden_size {} is not a multiple of num_attention_heads {} and no head_dim is given",
           c.hidden_size, c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  parse_rope(j, c);
  c.rms_norm_eps = static_cast<float>(get_number_or(j, "rms_norm_eps", 1e-6));
  c.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", false);
  c.max_position_embeddings = get_int_or(j, "max_position_embeddings", 2048);
  if (present(j, "hidden_act")) {
    const json& act = j.at("hidden_act");
    if (!act.is_string() || act.get<std::string>() != "silu")
      fail(ErrorCode::kUnsupported, "unsupported hidden_act {}; supported: silu", act.dump());
  }
  switch (c.architecture) {
    case Architecture::kLlama:
      c.attention_bias = get_bool_or(j, "attention_bias", false);
      c.o_proj_bias = c.attention_bias;
      c.mlp_bias = get_bool_or(j, "mlp_bias", false);
      break;
    case Architecture::kMistral:
      if (present(j, "sliding_window")) c.sliding_window = get_int(j, "sliding_window");
      break;
    case Architecture::kQwen2: {
      c.attention_bias = true;  // q/k/v always carry a bias in Qwen2; o_proj never
      bool sliding = get_bool_or(j, "use_sliding_window", false);
      if (present(j, "layer_types") && j.at("layer_types").is_array())
        for (const json& t : j.at("layer_types")) sliding |= t.is_string() && t.get<std::string>() == "sliding_attention";
      if (sliding && present(j, "sliding_window") && get_int(j, "sliding_window") < c.max_position_embeddings)
        fail(ErrorCode::kUnsupported, "Qwen2 per-layer sliding-window attention (use_sliding_window) is not supported");
      break;
    }
  }
  // A window that covers the whole context changes nothing.
  if (c.sliding_window && *c.sliding_window >= c.max_position_embeddings) c.sliding_window.reset();
  c.bos_token_ids = get_ids(j, "bos_token_id");
  c.eos_token_ids = get_ids(j, "eos_token_id");
  for (const char* key : {"torch_dtype", "dtype"})
    if (present(j, key) && j.at(key).is_string()) c.torch_dtype = j.at(key).get<std::string>();
  c.validate();
  return c;
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  std::filesystem::path p(path);
  if (std::filesystem::is_directory(p)) p /= "config.json";
  std::ifstream in(p);
  if (!in) fail(ErrorCode::kNotFound, "cannot open {}", p.string());
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorruptData, "{}: invalid JSON: {}", p.string(), e.what());
  }
  return from_json(j);
}

void ModelConfig::validate() const {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0) fail(ErrorCode::kCorruptData, "config.json: {} must be positive, got {}", name, v);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  if (num_heads % num_kv_heads != 0)
    fail(ErrorCode::kCorruptData, "config.json: num_attention_heads {} is not a multiple of num_key_value_heads {}", num_heads,
         num_kv_heads);
  if (head_dim % 2 != 0) fail(ErrorCode::kCorruptData, "config.json: head_dim must be even for RoPE, got {}", head_dim);
  if (!(rope_theta > 0.0f)) fail(ErrorCode::kCorruptData, "config.json: rope_theta must be positive, got {}", rope_theta);
  if (!(rms_norm_eps >= 0.0f)) fail(ErrorCode::kCorruptData, "config.json: rms_norm_eps must be >= 0, got {}", rms_norm_eps);
  if (sliding_window && *sliding_window <= 0)
    fail(ErrorCode::kCorruptData, "config.json: sliding_window must be positive, got {}", *sliding_window);
  // Sizes whose products must not overflow int64 (nor be absurd).
  constexpr int64_t kMax = int64_t{1} << 24;
  for (auto [v, name] : {std::pair{vocab_size, "vocab_size"}, {hidden_size, "hidden_size"}, {intermediate_size, "intermediate_size"},
                         {num_layers, "num_hidden_layers"}, {num_heads, "num_attention_heads"}, {head_dim, "head_dim"},
                         {max_position_embeddings, "max_position_embeddings"}})
    if (v > kMax) fail(ErrorCode::kCorruptData, "config.json: {} = {} is too large", name, v);
  for (int64_t id : bos_token_ids)
    if (id < 0 || id >= vocab_size) fail(ErrorCode::kCorruptData, "config.json: bos_token_id {} outside the vocabulary [0, {})", id, vocab_size);
  for (int64_t id : eos_token_ids)
    if (id < 0 || id >= vocab_size) fail(ErrorCode::kCorruptData, "config.json: eos_token_id {} outside the vocabulary [0, {})", id, vocab_size);
}

std::string ModelConfig::summary() const {
  return fmt::format("{}: {} layers, hidden {}, intermediate {}, {}/{} heads x {}, vocab {}, rope theta {}{}{}",
                     architecture_name(architecture), num_layers, hidden_size, intermediate_size, num_heads, num_kv_heads, head_dim,
                     vocab_size, rope_theta, rope_scaling.type == RopeScaling::Type::kLlama3 ? " (llama3 scaling)" : "",
                     tie_word_embeddings ? ", tied embeddings" : "");
}

}  // namespace qserve
