#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model_config.h"
#include "model/rope.h"

namespace qserve {
namespace {

using nlohmann::json;

json llama_json() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
    "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
    "rms_norm_eps": 1e-05, "rope_theta": 100000, "rope_scaling": null,
    "tie_word_embeddings": true, "max_position_embeddings": 8192,
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "torch_dtype": "bfloat16"})");
}

ErrorCode error_of(const json& j, std::string* message = nullptr) {
  try {
    ModelConfig::from_json(j);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "no error for " << j.dump();
  return ErrorCode::kInternal;
}

TEST(ModelConfig, ParsesSmolLm2) {
  const ModelConfig c = ModelConfig::from_json(llama_json());
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.group_size(), 3);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.sliding_window.has_value());
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_NE(c.summary().find("30 layers"), std::string::npos);
}

TEST(ModelConfig, Transformers5RopeParametersAndLlama3Scaling) {
  json j = llama_json();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  j["eos_token_id"] = {2, 0};
  j["head_dim"] = 48;
  const ModelConfig c = ModelConfig::from_json(j);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.head_dim, 48);  // explicit head_dim wins over hidden / heads
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 0}));
}

TEST(ModelConfig, OldStyleRopeScalingWithTypeKey) {
  json j = llama_json();
  j["rope_scaling"] = {{"type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}};
  EXPECT_EQ(ModelConfig::from_json(j).rope_scaling.type, RopeScaling::Type::kLlama3);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  std::string msg;
  EXPECT_EQ(error_of(j, &msg), ErrorCode::kUnsupported);
  EXPECT_NE(msg.find("yarn"), std::string::npos) << msg;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};  // incomplete
  EXPECT_EQ(error_of(j, &msg), ErrorCode::kCorruptData);
  EXPECT_NE(msg.find("low_freq_factor"), std::string::npos) << msg;
}

TEST(ModelConfig, ArchitectureSpecifics) {
  json q = llama_json();
  q["architectures"] = {"Qwen2ForCausalLM"};
  q["sliding_window"] = 4096;
  q["use_sliding_window"] = false;
  ModelConfig c = ModelConfig::from_json(q);
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_FALSE(c.sliding_window.has_value());
  q["use_sliding_window"] = true;
  EXPECT_EQ(error_of(q), ErrorCode::kUnsupported);

  json m = llama_json();
  m["architectures"] = {"MistralForCausalLM"};
  m["sliding_window"] = 4096;
  c = ModelConfig::from_json(m);
  EXPECT_EQ(c.architecture, Architecture::kMistral);
  EXPECT_EQ(c.sliding_window, 4096);
  m["sliding_window"] = 8192;  // covers the whole context: no window
  EXPECT_FALSE(ModelConfig::from_json(m).sliding_window.has_value());

  json l = llama_json();
  l["attention_bias"] = true;
  c = ModelConfig::from_json(l);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.o_proj_bias);

  json bare = llama_json();  // save_pretrained of a bare config: architectures null
  bare["architectures"] = nullptr;
  EXPECT_EQ(ModelConfig::from_json(bare).architecture, Architecture::kLlama);
}

TEST(ModelConfig, UnsupportedArchitectureIsAClearError) {
  json j = llama_json();
  j["architectures"] = {"GPT2LMHeadModel"};
  std::string msg;
  EXPECT_EQ(error_of(j, &msg), ErrorCode::kUnsupported);
  EXPECT_NE(msg.find("GPT2LMHeadModel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LlamaForCausalLM"), std::string::npos) << msg;
  j["hidden_act"] = "gelu";
  j["architectures"] = {"LlamaForCausalLM"};
  EXPECT_EQ(error_of(j), ErrorCode::kUnsupported);
}

TEST(ModelConfig, InvalidFieldsAreClearErrors) {
  std::string msg;
  json j = llama_json();
  j.erase("hidden_size");
  EXPECT_EQ(error_of(j, &msg), ErrorCode::kCorruptData);
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;

  j = llama_json();
  j["num_key_value_heads"] = 2;  // 9 % 2 != 0
  EXPECT_EQ(error_of(j, &msg), ErrorCode::kCorruptData);
  EXPECT_NE(msg.find("num_key_value_heads"), std::string::npos) << msg;

  j = llama_json();
  j["num_attention_heads"] = 7;  // 576 % 7 != 0, no head_dim
  EXPECT_EQ(error_of(j), ErrorCode::kCorruptData);

  j = llama_json();
  j["num_attention_heads"] = 0;
  EXPECT_EQ(error_of(j), ErrorCode::kCorruptData);

  j = llama_json();
  j["vocab_size"] = "many";
  EXPECT_EQ(error_of(j), ErrorCode::kCorruptData);

  j = llama_json();
  j["vocab_size"] = int64_t{1} << 40;
  EXPECT_EQ(error_of(j), ErrorCode::kCorruptData);

  j = llama_json();
  j["eos_token_id"] = 60000;
  EXPECT_EQ(error_of(j), ErrorCode::kCorruptData);

  j = llama_json();
  j["head_dim"] = 63;
  EXPECT_EQ(error_of(j), ErrorCode::kCorruptData);

  EXPECT_EQ(error_of(json::array()), ErrorCode::kCorruptData);
  EXPECT_THROW(ModelConfig::from_file("/nonexistent/config.json"), Error);
}

// inv_freq against values computed by transformers 5.24
// (_compute_default_rope_parameters / _compute_llama3_parameters).
TEST(ModelConfig, RopeFrequenciesMatchTransformers) {
  json j = llama_json();
  j["hidden_size"] = 72;
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 2;
  j["head_dim"] = 12;
  j["rope_theta"] = 10000.0;
  const std::vector<float> plain = rope_inv_freq(ModelConfig::from_json(j));
  const float expect_plain[] = {1.0f, 0.21544346f, 0.046415888f, 0.01f, 0.0021544347f, 0.00046415889f};
  ASSERT_EQ(plain.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(plain[i], expect_plain[i], 1e-6f * expect_plain[i]) << i;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}};
  const std::vector<float> scaled = rope_inv_freq(ModelConfig::from_json(j));
  // wavelengths 6.3 (kept), 29.2 (blended), >= 135 (divided by 8)
  const float expect_scaled[] = {1.0f, 0.10198933631181717f, 0.005801985505968332f, 0.0012499999720603228f,
                                 0.0002693042915780097f, 5.801986844744533e-05f};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(scaled[i], expect_scaled[i], 1e-5f * expect_scaled[i]) << i;
}

}  // namespace
}  // namespace qserve
