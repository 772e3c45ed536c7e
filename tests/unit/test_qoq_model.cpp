// Quantized checkpoints run through the Llama forward pass (LlamaModel::load
// dispatches on quantization_config): FP16 pass-through matches the original
// model, QoQ W8A8KV8 stays close, W4A8KV4 stays correlated, and the transforms'
// rotated embedding / untied lm_head are wired right.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/llama_model.h"
#include "quant/quantizer.h"
#include "test_files.h"
#include "tiny_llama_files.h"

namespace qserve {
namespace {

using namespace testing_files;

std::vector<float> all_logits(LlamaModel& m, const std::vector<int32_t>& tokens) {
  Batch b;
  b.seqs.push_back({0, tokens, 0});
  b.all_logits = true;
  Logits out;
  m.forward(b, out);
  m.release(0);
  return out.all;
}

// Relative RMS error of b against a.
double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += a[i] * a[i];
  return std::sqrt(num / den);
}

std::vector<std::vector<int32_t>> calib() {
  std::vector<std::vector<int32_t>> c(4, std::vector<int32_t>(24));
  for (size_t s = 0; s < c.size(); ++s)
    for (size_t t = 0; t < c[s].size(); ++t) c[s][t] = static_cast<int32_t>((s * 31 + t * 7) % kVocab);
  return c;
}

TEST(QoqModel, QuantizedCheckpointsRunInTheForwardPass) {
  TempDir tmp;
  write_tiny_model(tmp.path() / "in");
  auto in = open_checkpoint((tmp.path() / "in").string());
  const std::vector<int32_t> prompt = {1, 5, 9, 2, 33, 17, 8, 8, 21, 3, 0, 39};
  auto ref_model = LlamaModel::load(*in);
  const std::vector<float> ref = all_logits(*ref_model, prompt);

  struct Case {
    quant::Precision p;
    int64_t group;
    bool qoq;
    double max_err;
  };
  for (const Case& c : {Case{quant::Precision::kFP16, 128, false, 1e-3}, Case{quant::Precision::kW8A8KV8, 128, true, 0.05},
                        Case{quant::Precision::kW4A8KV4, 128, true, 0.3}, Case{quant::Precision::kW4A8KV4, -1, true, 0.3},
                        Case{quant::Precision::kW4A16, 128, false, 0.3}}) {
    quant::QuantizeOptions o;
    o.precision = c.p;
    o.group = c.group;
    o.calibration = calib();
    if (!c.qoq) o.rotate = o.smooth_attention = o.smooth_output = o.reorder = o.clip = false;
    const fs::path out = tmp.path() / (quant::precision_name(c.p) + std::to_string(c.group));
    quant::quantize_checkpoint(*in, out.string(), o);
    auto q = open_checkpoint(out.string());
    auto model = LlamaModel::load(*q);
    const double err = rel_rms(ref, all_logits(*model, prompt));
    std::printf("  %s g%lld: relative RMS logit error %.4f\n", quant::precision_name(c.p).c_str(), static_cast<long long>(c.group), err);
    EXPECT_LT(err, c.max_err) << quant::precision_name(c.p) << " g" << c.group;
    // The same checkpoint gives the same logits twice (the KV cache is reset per sequence).
    EXPECT_EQ(all_logits(*model, prompt), all_logits(*model, prompt));
  }
}

TEST(QoqModel, RotationAloneKeepsTheModelAtW8A8) {
  // W8A8 with and without rotation are both close to FP: the rotation's
  // bookkeeping (embedding E Q, lm_head W Q with the final norm folded) is right.
  TempDir tmp;
  write_tiny_model(tmp.path() / "in");
  auto in = open_checkpoint((tmp.path() / "in").string());
  const std::vector<int32_t> prompt = {4, 8, 15, 16, 23, 2};
  const std::vector<float> ref = all_logits(*LlamaModel::load(*in), prompt);
  quant::QuantizeOptions o;
  o.precision = quant::Precision::kW8A8KV8;
  o.smooth_attention = o.smooth_output = o.reorder = o.clip = false;  // rotation only: no calibration
  quant::quantize_checkpoint(*in, (tmp.path() / "rot").string(), o);
  auto q = open_checkpoint((tmp.path() / "rot").string());
  EXPECT_FALSE(q->config()["tie_word_embeddings"].get<bool>());
  EXPECT_LT(rel_rms(ref, all_logits(*LlamaModel::load(*q), prompt)), 0.1);
}

// The switch tests below: the tiny model quantized to W4A8KV4 with GPTQ under
// option variants, each checked to be recorded and to give a working model.
class QoqSwitches : public testing::Test {
 protected:
  void SetUp() override {
    write_tiny_model(tmp_.path() / "in");
    in_ = open_checkpoint((tmp_.path() / "in").string());
    ref_ = all_logits(*LlamaModel::load(*in_), kPrompt);
  }
  // Quantizes with `o` into `name`; returns the recorded transforms and the
  // logits of the quantized model (checked to stay near the FP model's).
  std::pair<nlohmann::json, std::vector<float>> quantize(const quant::QuantizeOptions& o, const std::string& name) {
    const fs::path out = tmp_.path() / name;
    quant::quantize_checkpoint(*in_, out.string(), o);
    auto q = open_checkpoint(out.string());
    std::vector<float> logits = all_logits(*LlamaModel::load(*q), kPrompt);
    EXPECT_LT(rel_rms(ref_, logits), 0.3) << name;
    return {q->config()["quantization_config"]["transforms"], std::move(logits)};
  }
  static quant::QuantizeOptions gptq_options() {
    quant::QuantizeOptions o;
    o.precision = quant::Precision::kW4A8KV4;
    o.calibration = calib();
    o.gptq = true;
    return o;
  }
  static inline const std::vector<int32_t> kPrompt = {1, 5, 9, 2, 33, 17, 8, 8, 21, 3, 0, 39};
  TempDir tmp_;
  std::shared_ptr<Checkpoint> in_;
  std::vector<float> ref_;
};

TEST_F(QoqSwitches, ValueRotationAndQuantizedStreamsAreRecordedAndChangeTheCodes) {
  // Value rotation (exact in FP) and calibration on the quantized stream (later blocks see
  // the quantized earlier ones) both give a working W4A8KV4 model, recorded in the config,
  // and both change the checkpoint (the switches are wired).
  std::vector<std::vector<float>> logits;
  for (int variant = 0; variant < 4; ++variant) {
    quant::QuantizeOptions o = gptq_options();
    o.rotate_values = variant == 1;
    o.quantized_stream = variant >= 2;
    o.stream_numerics = variant == 3;
    auto [t, l] = quantize(o, "v" + std::to_string(variant));
    EXPECT_EQ(t.value("rotate_values", false), variant == 1);
    EXPECT_EQ(t.value("quantized_stream", false), variant >= 2);
    EXPECT_EQ(t.value("stream_numerics", false), variant == 3);
    logits.push_back(std::move(l));
  }
  EXPECT_NE(logits[0], logits[1]);
  EXPECT_NE(logits[0], logits[2]);
  EXPECT_NE(logits[2], logits[3]);
}

TEST_F(QoqSwitches, StagedGptqSwitchesAreRecordedAndChangeTheCodes) {
  // GPTQ stage by stage inside each block, towards the FP model's outputs, and the
  // GPTQ-aware clip search (quant/gptq_block.h): a working W4A8KV4 model, recorded in
  // the config, other codes.
  std::vector<std::vector<float>> logits;
  for (int variant = 0; variant < 4; ++variant) {
    quant::QuantizeOptions o = gptq_options();
    o.quantized_stream = true;
    o.gptq_sequential = variant == 1 || variant == 2;
    o.gptq_fp_target = variant == 2;
    o.gptq_clip_search = variant == 3;
    o.gptq_clip_ratios = {1.0f, 0.9f};
    auto [t, l] = quantize(o, "s" + std::to_string(variant));
    EXPECT_EQ(t.value("gptq_sequential", false), variant == 1 || variant == 2);
    EXPECT_EQ(t.value("gptq_fp_target", false), variant == 2);
    EXPECT_EQ(t.value("gptq_clip_search", false), variant == 3);
    if (variant == 3) EXPECT_EQ(t["gptq_clip_ratios"].get<std::vector<float>>(), o.gptq_clip_ratios);
    logits.push_back(std::move(l));
  }
  EXPECT_NE(logits[0], logits[1]);
  EXPECT_NE(logits[1], logits[2]);
  EXPECT_NE(logits[0], logits[3]);
}

}  // namespace
}  // namespace qserve
