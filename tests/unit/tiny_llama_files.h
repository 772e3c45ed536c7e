// A tiny random Llama checkpoint on disk (Hugging Face layout, F16, tied
// embeddings) for the quantizer and quantized-model tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "core/tensor.h"
#include "model/safetensors.h"

namespace qserve::testing_files {

namespace fs = std::filesystem;

constexpr int64_t kHidden = 96, kInter = 160, kHeads = 4, kKvHeads = 2, kHeadDim = 24, kVocab = 40, kLayers = 2;

inline Tensor random_f16(std::mt19937& rng, std::vector<int64_t> shape, float stddev, float mean = 0) {
  Tensor t = Tensor::zeros(DType::kF16, shape);
  std::normal_distribution<float> g(mean, stddev);
  for (auto& v : t.span<uint16_t>()) v = float_to_half(g(rng));
  return t;
}

// A tiny random Llama checkpoint (tied embeddings, F16) in a HF directory.
inline void write_tiny_model(const fs::path& dir) {
  fs::create_directories(dir);
  std::mt19937 rng(17);
  SafetensorsWriter w;
  w.add("model.embed_tokens.weight", random_f16(rng, {kVocab, kHidden}, 1.0f));
  w.add("model.norm.weight", random_f16(rng, {kHidden}, 0.1f, 1.0f));
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w.add(p + "self_attn.q_proj.weight", random_f16(rng, {kHeads * kHeadDim, kHidden}, 0.1f));
    w.add(p + "self_attn.k_proj.weight", random_f16(rng, {kKvHeads * kHeadDim, kHidden}, 0.1f));
    w.add(p + "self_attn.v_proj.weight", random_f16(rng, {kKvHeads * kHeadDim, kHidden}, 0.1f));
    w.add(p + "self_attn.o_proj.weight", random_f16(rng, {kHidden, kHeads * kHeadDim}, 0.1f));
    w.add(p + "mlp.gate_proj.weight", random_f16(rng, {kInter, kHidden}, 0.1f));
    w.add(p + "mlp.up_proj.weight", random_f16(rng, {kInter, kHidden}, 0.1f));
    w.add(p + "mlp.down_proj.weight", random_f16(rng, {kHidden, kInter}, 0.1f));
    w.add(p + "input_layernorm.weight", random_f16(rng, {kHidden}, 0.1f, 1.0f));
    w.add(p + "post_attention_layernorm.weight", random_f16(rng, {kHidden}, 0.1f, 1.0f));
  }
  w.write((dir / "model.safetensors").string());
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", kHidden},
                      {"intermediate_size", kInter}, {"num_attention_heads", kHeads},
                      {"num_key_value_heads", kKvHeads}, {"num_hidden_layers", kLayers},
                      {"vocab_size", kVocab}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
                      {"tie_word_embeddings", true}, {"max_position_embeddings", 256}};
  std::ofstream(dir / "config.json") << c.dump(2);
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE"}})";
}

}  // namespace qserve::testing_files
