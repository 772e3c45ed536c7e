// The quantized checkpoint: written by the quantizer, read back with
// validation; corrupted or mismatched directories give clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/half.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "quant/qoq_checkpoint.h"
#include "quant/quantizer.h"
#include "test_files.h"
#include "tiny_llama_files.h"

namespace qserve::quant {
namespace {

using testing_files::expect_error;
using testing_files::TempDir;
using namespace testing_files;
namespace fs = std::filesystem;

std::vector<std::vector<int32_t>> calibration(int n, int len) {
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(len));
  for (auto& s : out)
    for (auto& t : s) t = static_cast<int32_t>(rng() % kVocab);
  return out;
}

QuantizeOptions rtn(Precision p, int64_t group) {
  QuantizeOptions o;
  o.precision = p;
  o.group = group;
  o.rotate = o.smooth_attention = o.smooth_output = o.reorder = o.clip = false;
  return o;
}

void rewrite_json(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = read_json_file(file.string());
  edit(j);
  std::ofstream(file) << j.dump(2);
}

TEST(QoqCheckpoint, RoundTripEveryFormatMatchesTheQuantizer) {
  TempDir tmp;
  write_tiny_model(tmp.path() / "in");
  auto in = open_checkpoint((tmp.path() / "in").string());
  for (auto [p, g] : {std::pair{Precision::kW4A8KV4, int64_t{128}}, std::pair{Precision::kW4A8KV4, int64_t{-1}},
                      std::pair{Precision::kW8A8KV8, int64_t{128}}, std::pair{Precision::kW4A16, int64_t{128}},
                      std::pair{Precision::kFP16, int64_t{128}}}) {
    const fs::path out = tmp.path() / (precision_name(p) + std::to_string(g));
    quantize_checkpoint(*in, out.string(), rtn(p, g));
    auto q = open_checkpoint(out.string());
    ASSERT_TRUE(is_qoq_checkpoint(q->config()));
    const QoqConfig qc = qoq_config_from_json(q->config()["quantization_config"]);
    EXPECT_EQ(qc.precision, p);
    EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
    const LlamaShape s = llama_shape_from_config(q->config());
    for (int64_t l = 0; l < kLayers; ++l) {
      const QuantizedBlock b = load_quantized_block(*q, qc, s, l);
      // RTN: the stored layer is exactly what quantize_linear makes of the input weights.
      Tensor src = to_f32(in->get("model.layers." + std::to_string(l) + ".mlp.down_proj.weight"));
      Matrix m(kHidden, kInter);
      std::copy_n(src.data_as<float>(), m.data.size(), m.data.data());
      const QuantizedLinear want = quantize_linear(qc.format, m, 128);
      EXPECT_EQ(dequantize_linear(want), dequantize_linear(b.down)) << precision_name(p);
    }
  }
}

TEST(QoqCheckpoint, FullQoqPipelineWritesAValidCheckpoint) {
  TempDir tmp;
  write_tiny_model(tmp.path() / "in");
  auto in = open_checkpoint((tmp.path() / "in").string());
  QuantizeOptions o;
  o.calibration = calibration(3, 16);
  o.calibration_name = "random";
  int calls = 0;
  o.progress = [&](int64_t, int64_t, const std::string&) { ++calls; };
  const QuantizeReport rep = quantize_checkpoint(*in, (tmp.path() / "out").string(), o);
  EXPECT_GT(calls, kLayers);
  ASSERT_EQ(rep.layers.size(), static_cast<size_t>(kLayers));
  auto q = open_checkpoint((tmp.path() / "out").string());
  const auto& c = q->config();
  EXPECT_FALSE(c["tie_word_embeddings"].get<bool>());  // the folded final norm unties lm_head
  EXPECT_TRUE(q->has("lm_head.weight"));
  const QoqConfig qc = qoq_config_from_json(c["quantization_config"]);
  EXPECT_TRUE(qc.fold_norms);
  EXPECT_NE(qc.rotation.find("paley hadamard 12"), std::string::npos) << qc.rotation;  // 96 = 8 * 12
  EXPECT_TRUE(qc.reorder);
  EXPECT_TRUE(qc.clip);
  EXPECT_EQ(qc.calibration_samples, 3);
  for (int64_t l = 0; l < kLayers; ++l) load_quantized_block(*q, qc, llama_shape_from_config(c), l);
}

TEST(QoqCheckpoint, CorruptedCheckpointsGiveClearErrors) {
  TempDir tmp;
  write_tiny_model(tmp.path() / "in");
  auto in = open_checkpoint((tmp.path() / "in").string());
  const fs::path out = tmp.path() / "out";
  quantize_checkpoint(*in, out.string(), rtn(Precision::kW4A8KV4, 128));
  const nlohmann::json good = read_json_file((out / "config.json").string());
  const LlamaShape s = llama_shape_from_config(good);
  auto load_all = [&] {
    auto q = open_checkpoint(out.string());
    const QoqConfig qc = qoq_config_from_json(q->config()["quantization_config"]);
    for (int64_t l = 0; l < kLayers; ++l) load_quantized_block(*q, qc, s, l);
  };
  load_all();
  auto restore = [&] { std::ofstream(out / "config.json") << good.dump(2); };

  rewrite_json(out / "config.json", [](auto& j) { j["quantization_config"]["precision"] = "w3a8"; });
  expect_error(load_all, ErrorCode::kCorruptData, {"quantization_config", "w3a8"});
  restore();
  rewrite_json(out / "config.json", [](auto& j) { j["quantization_config"]["weight_format"] = "w4_per_channel"; });
  expect_error(load_all, ErrorCode::kCorruptData, {"weight_format", "w4_per_channel", "does not match"});
  restore();
  rewrite_json(out / "config.json", [](auto& j) { j["quantization_config"]["kv_bits"] = 8; });
  expect_error(load_all, ErrorCode::kCorruptData, {"kv_bits"});
  restore();
  rewrite_json(out / "config.json", [](auto& j) { j["quantization_config"].erase("group_size"); });
  expect_error(load_all, ErrorCode::kCorruptData, {"group_size"});
  restore();
  // Per-channel loader on a g128 checkpoint: the scales it needs are not there.
  rewrite_json(out / "config.json", [](auto& j) {
    j["quantization_config"]["group_size"] = -1;
    j["quantization_config"]["weight_format"] = "w4_per_channel";
  });
  expect_error(load_all, ErrorCode::kCorruptData, {"model.layers.0.self_attn.q_proj.scale", "missing"});
  restore();

  // A missing scale tensor: drop it from the index.
  const nlohmann::json index = read_json_file((out / "model.safetensors.index.json").string());
  rewrite_json(out / "model.safetensors.index.json",
               [](auto& j) { j["weight_map"].erase("model.layers.1.mlp.up_proj.s2"); });
  expect_error(load_all, ErrorCode::kCorruptData, {"model.layers.1.mlp.up_proj.s2", "missing"});
  std::ofstream(out / "model.safetensors.index.json") << index.dump(2);

  // A wrong shape and an out-of-range s2, in an extra shard the index points to.
  for (int variant = 0; variant < 2; ++variant) {
    SafetensorsWriter w;
    Tensor bad = variant == 0 ? Tensor::zeros(DType::kF16, {kHeads * kHeadDim + 1}) : Tensor::zeros(DType::kU8, {kHeads * kHeadDim, 1});
    w.add(variant == 0 ? "model.layers.0.self_attn.q_proj.s1" : "model.layers.0.self_attn.q_proj.s2", bad);
    w.write((out / "bad.safetensors").string());
    rewrite_json(out / "model.safetensors.index.json", [&](auto& j) {
      j["weight_map"][variant == 0 ? "model.layers.0.self_attn.q_proj.s1" : "model.layers.0.self_attn.q_proj.s2"] =
          "bad.safetensors";
    });
    if (variant == 0)
      expect_error(load_all, ErrorCode::kCorruptData, {"model.layers.0.self_attn.q_proj.s1", "F16[97]", "expected F16[96]"});
    else
      expect_error(load_all, ErrorCode::kCorruptData, {"q_proj.s2", "element 0 is 0", "outside [1, 16]"});
    std::ofstream(out / "model.safetensors.index.json") << index.dump(2);
  }
}

// A quantization_config whose fields have the wrong JSON types is a
// kCorruptData error, not a JSON library exception (found by
// fuzz_model_config); is_qoq_checkpoint only says no.
TEST(QoqCheckpoint, WronglyTypedQuantizationConfigIsAClearError) {
  const nlohmann::json good = qoq_config_to_json(QoqConfig{});
  ASSERT_NO_THROW(qoq_config_from_json(good));
  for (const char* edit : {R"({"method": 1})", R"({"format_version": "1"})", R"({"weight_bits": "4"})",
                           R"({"transforms": {"fold_norms": "yes"}})", R"({"transforms": {"gptq_clip_ratios": ["a"]}})",
                           R"({"transforms": {"smooth_attention": {"alpha": 0.5, "statistic": 3}}})",
                           R"({"calibration": {"samples": "8"}})"}) {
    SCOPED_TRACE(edit);
    nlohmann::json j = good;
    j.merge_patch(nlohmann::json::parse(edit));
    expect_error([&] { qoq_config_from_json(j); }, ErrorCode::kCorruptData, {"quantization_config"});
  }
  EXPECT_FALSE(is_qoq_checkpoint(nlohmann::json::parse(R"({"quantization_config": {"method": 1}})")));
  EXPECT_TRUE(is_qoq_checkpoint(nlohmann::json{{"quantization_config", good}}));
}

TEST(QoqCheckpoint, QuantizerRejectsBadInput) {
  TempDir tmp;
  write_tiny_model(tmp.path() / "in");
  auto in = open_checkpoint((tmp.path() / "in").string());
  QuantizeOptions o;  // QoQ steps on, no calibration
  expect_error([&] { quantize_checkpoint(*in, (tmp.path() / "o").string(), o); }, ErrorCode::kInvalidArgument,
               {"calibration"});
  expect_error([&] { quantize_checkpoint(*in, (tmp.path() / "o").string(), rtn(Precision::kW4A16, -1)); },
               ErrorCode::kInvalidArgument, {"per channel"});
  rewrite_json(tmp.path() / "in" / "config.json", [](auto& j) { j["intermediate_size"] = 150; });
  auto in2 = open_checkpoint((tmp.path() / "in").string());
  expect_error([&] { quantize_checkpoint(*in2, (tmp.path() / "o").string(), rtn(Precision::kW4A8KV4, 128)); },
               ErrorCode::kCorruptData, {"model.layers.0.mlp.gate_proj.weight", "F16[160, 96]", "expected [150, 96]"});
}

}  // namespace
}  // namespace qserve::quant
