#include "model/gguf_checkpoint.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <regex>

#include "core/error.h"
#include "model/gguf.h"
#include "model/gguf_tokenizer.h"

namespace qserve {
namespace {

using json = nlohmann::json;

struct Arch {
  const char* gguf_name;
  const char* hf_class;
  const char* model_type;
  bool permuted_qk;  // llama.cpp's converter permuted q/k rows for its RoPE layout
};
constexpr Arch kArchs[] = {
    {"llama", "LlamaForCausalLM", "llama", true},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", false},
};

// A float32 metadata value written as the shortest decimal that reads back as
// the same float (1e-05, not 9.99999974737875e-06).
double tidy_f32(double v) { return std::strtod(fmt::format("{}", static_cast<float>(v)).c_str(), nullptr); }

// GGUF block names -> Hugging Face names (llama.cpp gguf-py tensor_mapping.py).
std::optional<std::string> hf_name(const std::string& name) {
  static const std::map<std::string, std::string> kTop = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  static const std::map<std::string, std::string> kBlock = {
      {"attn_norm", "input_layernorm"},      {"ffn_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},        {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},        {"attn_output", "self_attn.o_proj"},
      {"ffn_gate", "mlp.gate_proj"},         {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  if (auto it = kTop.find(name); it != kTop.end()) return it->second;
  static const std::regex kBlockRe(R"(blk\.(\d+)\.([a-z_]+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(name, m, kBlockRe)) return std::nullopt;
  auto it = kBlock.find(m[2].str());
  if (it == kBlock.end()) return std::nullopt;
  return "model.layers." + m[1].str() + "." + it->second + "." + m[3].str();
}

// llama.cpp stores q_proj / k_proj rows permuted: within each head, HF row
// i * (hd/2) + j (i in {0,1}: the rotate-half halves) sits at GGUF row 2j + i
// (interleaved pairs). Undo it: hf[h, i, j, :] = gguf[h, j, i, :].
Tensor unpermute_rows(const Tensor& t, int64_t n_heads, const std::string& what) {
  const int64_t rows = t.rank() > 0 ? t.dim(0) : 0;
  // (n_heads from the metadata: compared before 2 n_heads is formed)
  if (rows <= 0 || n_heads <= 0 || n_heads > rows / 2 || rows % (2 * n_heads) != 0) {
    fail(ErrorCode::kCorruptData, "{}: {} rows are not a positive multiple of 2 x {} heads", what, rows, n_heads);
  }
  const int64_t cols = t.rank() > 1 ? t.numel() / rows : 1;
  const int64_t half = rows / n_heads / 2;
  Tensor out = Tensor::zeros(t.dtype(), t.shape());  // rows move whole: any element type
  const size_t row_bytes = dtype_row_bytes(t.dtype(), cols);
  const auto* src = static_cast<const uint8_t*>(t.data());
  auto* dst = static_cast<uint8_t*>(out.data());
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        const int64_t hf_row = h * 2 * half + i * half + j;
        const int64_t gguf_row = h * 2 * half + j * 2 + i;
        std::memcpy(dst + hf_row * row_bytes, src + gguf_row * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

json synthesize_config(const GgufFile& g, const Arch& arch, const std::map<std::string, Tensor>& tensors) {
  const std::string p = std::string(arch.gguf_name) + ".";
  auto need = [&](const std::string& key) {
    const uint64_t v = g.get_uint_or(p + key, 0);
    if (v == 0) fail(ErrorCode::kCorruptData, "{}: metadata '{}{}' is missing or zero", g.path(), p, key);
    return v;
  };
  const uint64_t hidden = need("embedding_length");
  const uint64_t heads = need("attention.head_count");
  const uint64_t kv_heads = g.get_uint_or(p + "attention.head_count_kv", heads);
  const uint64_t head_dim = g.get_uint_or(p + "attention.key_length", hidden / heads);
  uint64_t vocab = g.get_uint_or(p + "vocab_size", 0);
  if (vocab == 0) {
    auto it = tensors.find("model.embed_tokens.weight");
    if (it == tensors.end()) fail(ErrorCode::kCorruptData, "{}: no token_embd.weight", g.path());
    vocab = static_cast<uint64_t>(it->second.dim(0));
  }
  json c = {
      {"architectures", {arch.hf_class}},
      {"model_type", arch.model_type},
      {"hidden_size", hidden},
      {"intermediate_size", need("feed_forward_length")},
      {"num_hidden_layers", need("block_count")},
      {"num_attention_heads", heads},
      {"num_key_value_heads", kv_heads},
      {"head_dim", head_dim},
      {"vocab_size", vocab},
      {"max_position_embeddings", g.get_uint_or(p + "context_length", 2048)},
      {"rms_norm_eps", tidy_f32(g.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-6))},
      {"rope_theta", tidy_f32(g.get_float_or(p + "rope.freq_base", 10000.0))},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", tensors.count("lm_head.weight") == 0},
      {"torch_dtype", "float32"},
  };
  if (std::string(arch.model_type) == "llama") {
    c["attention_bias"] = tensors.count("model.layers.0.self_attn.q_proj.bias") != 0;
    c["mlp_bias"] = false;
  }
  const std::string scaling = g.get_string_opt(p + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    c["rope_scaling"] = {{"type", "linear"}, {"factor", tidy_f32(g.get_float_or(p + "rope.scaling.factor", 1.0))}};
  } else if (scaling != "none") {
    fail(ErrorCode::kUnsupported, "{}: rope scaling '{}' is not supported", g.path(), scaling);
  } else {
    c["rope_scaling"] = nullptr;
  }
  const auto& tokens = g.find("tokenizer.ggml.tokens") ? g.get_array("tokenizer.ggml.tokens") : json::array();
  for (const char* key : {"bos", "eos", "pad"}) {
    const std::string k = fmt::format("tokenizer.ggml.{}_token_id", std::string(key) == "pad" ? "padding" : key);
    if (g.find(k)) {
      const uint64_t id = g.get_uint_or(k, 0);
      if (!tokens.empty() && id >= tokens.size()) fail(ErrorCode::kCorruptData, "{}: {} = {} is outside the vocabulary", g.path(), k, id);
      c[std::string(key) + "_token_id"] = id;
    }
  }
  return c;
}

}  // namespace

std::shared_ptr<Checkpoint> open_gguf_checkpoint(const std::string& path) {
  auto g = GgufFile::open(path);
  const std::string arch_name = g->get_string_opt("general.architecture").value_or("");
  const Arch* arch = nullptr;
  for (const Arch& a : kArchs) {
    if (arch_name == a.gguf_name) arch = &a;
  }
  if (arch == nullptr) {
    fail(ErrorCode::kUnsupported, "{}: architecture '{}' is not supported (llama, qwen2)", path, arch_name);
  }
  if (g->find_tensor("rope_freqs.weight")) {
    fail(ErrorCode::kUnsupported, "{}: Llama 3 rope frequency scaling (rope_freqs) is not supported from GGUF", path);
  }
  const std::string p = std::string(arch->gguf_name) + ".";
  const int64_t heads = static_cast<int64_t>(g->get_uint_or(p + "attention.head_count", 0));
  const int64_t kv_heads = static_cast<int64_t>(g->get_uint_or(p + "attention.head_count_kv", heads));

  std::map<std::string, Tensor> tensors;
  for (const auto& info : g->tensors()) {
    const auto name = hf_name(info.name);
    if (!name) fail(ErrorCode::kUnsupported, "{}: tensor '{}' has no Hugging Face counterpart", path, info.name);
    Tensor t = g->load(info);  // as stored (F32, F16, BF16, block formats)
    if (arch->permuted_qk) {
      const bool is_q = name->find(".self_attn.q_proj.") != std::string::npos;
      const bool is_k = name->find(".self_attn.k_proj.") != std::string::npos;
      if (is_q || is_k) t = unpermute_rows(t, is_q ? heads : kv_heads, path + ": " + info.name);
    }
    tensors.emplace(*name, std::move(t));
  }
  json config = synthesize_config(*g, *arch, tensors);
  std::map<std::string, json> files;
  if (g->find("tokenizer.ggml.model")) {
    files["tokenizer.json"] = gguf_tokenizer_json(*g);
    files["tokenizer_config.json"] = gguf_tokenizer_config(*g);
    files["generation_config.json"] = gguf_generation_config(*g);
  }
  return std::make_shared<Checkpoint>(path, std::move(config), std::move(tensors), std::move(files),
                                      /*is_directory=*/false);
}

}  // namespace qserve
