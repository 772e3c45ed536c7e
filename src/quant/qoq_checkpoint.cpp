#include "quant/qoq_checkpoint.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/half.h"
#include "model/safetensors.h"

namespace qserve::quant {
namespace fs = std::filesystem;
namespace {

template <typename T>
Tensor owned(DType dtype, std::vector<int64_t> shape, std::vector<T> data) {
  auto holder = std::make_shared<std::vector<T>>(std::move(data));
  void* p = holder->data();
  return Tensor(dtype, std::move(shape), p, std::shared_ptr<void>(holder, p));
}

void add_linear(SafetensorsWriter& out, const std::string& prefix, const QuantizedLinear& q) {
  const int64_t n = q.n, k = q.k;
  switch (q.format) {
    case WeightFormat::kF16:
      out.add(prefix + ".weight", owned(DType::kF16, {n, k}, q.f16));
      break;
    case WeightFormat::kW4G128:
      out.add(prefix + ".qweight", owned(DType::kU8, {n, k / 2}, q.g128.qweight));
      out.add(prefix + ".s1", owned(DType::kF16, {n}, q.g128.s1));
      out.add(prefix + ".s2", owned(DType::kU8, {n, q.g128.groups()}, q.g128.s2));
      out.add(prefix + ".zero", owned(DType::kU8, {n, q.g128.groups()}, q.g128.zero));
      break;
    case WeightFormat::kW4PerChannel:
      out.add(prefix + ".qweight", owned(DType::kU8, {n, k / 2}, q.w4pc.qweight));
      out.add(prefix + ".scale", owned(DType::kF16, {n}, q.w4pc.scale));
      out.add(prefix + ".zero", owned(DType::kU8, {n}, q.w4pc.zero));
      break;
    case WeightFormat::kW8PerChannel:
      out.add(prefix + ".qweight", owned(DType::kI8, {n, k}, q.w8.q));
      out.add(prefix + ".scale", owned(DType::kF16, {n}, q.w8.scale));
      break;
    case WeightFormat::kW4A16:
      out.add(prefix + ".qweight", owned(DType::kU8, {n, k / 2}, q.w4a16.qweight));
      out.add(prefix + ".scale", owned(DType::kF16, {n, q.w4a16.groups()}, q.w4a16.scale));
      out.add(prefix + ".zero", owned(DType::kU8, {n, q.w4a16.groups()}, q.w4a16.zero));
      break;
  }
}

Tensor f16_vector(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
  return owned(DType::kF16, {static_cast<int64_t>(v.size())}, std::move(h));
}

const char* kLinears[7][2] = {{"self_attn.q_proj", "q"},  {"self_attn.k_proj", "k"}, {"self_attn.v_proj", "v"},
                              {"self_attn.o_proj", "o"},  {"mlp.gate_proj", "gate"}, {"mlp.up_proj", "up"},
                              {"mlp.down_proj", "down"}};

// ---- reading ----

const Tensor& expect(const Checkpoint& c, const std::string& name, DType dtype, std::vector<int64_t> shape) {
  if (!c.has(name)) fail(ErrorCode::kCorruptData, "{}: quantized tensor '{}' is missing", c.path(), name);
  const Tensor& t = c.get(name);
  if (t.dtype() != dtype || t.shape() != shape) {
    Tensor want(dtype, shape, nullptr);
    fail(ErrorCode::kCorruptData, "{}: tensor '{}' is {}, expected {}", c.path(), name, t.describe(), want.describe());
  }
  return t;
}

template <typename T>
std::vector<T> copy_of(const Tensor& t) {
  return std::vector<T>(t.data_as<T>(), t.data_as<T>() + t.numel());
}

void check_range(const Checkpoint& c, const std::string& name, const std::vector<uint8_t>& v, int lo, int hi) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < lo || v[i] > hi)
      fail(ErrorCode::kCorruptData, "{}: tensor '{}' element {} is {}, outside [{}, {}]", c.path(), name, i, v[i], lo, hi);
}

}  // namespace

nlohmann::json qoq_config_to_json(const QoqConfig& c) {
  nlohmann::json t;
  t["fold_norms"] = c.fold_norms;
  t["rotation"] = c.rotation.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.rotation);
  auto alpha = [](double a) { return a > 0 ? nlohmann::json{{"alpha", a}} : nlohmann::json(nullptr); };
  t["smooth_attention"] = alpha(c.smooth_attention_alpha);
  if (c.smooth_attention_alpha > 0 && c.smooth_attention_mean) t["smooth_attention"]["statistic"] = "mean";
  t["smooth_output"] = alpha(c.smooth_output_alpha);
  t["smooth_input"] = alpha(c.smooth_input_alpha);
  t["reorder"] = c.reorder;
  t["clip"] = c.clip;
  t["gptq"] = c.gptq;
  t["gptq_act_order"] = c.gptq_act_order;
  t["gptq_sequential"] = c.gptq_sequential;
  t["gptq_fp_target"] = c.gptq_fp_target;
  t["gptq_clip_search"] = c.gptq_clip_search;
  if (c.gptq_clip_search) t["gptq_clip_ratios"] = c.gptq_clip_ratios;
  t["rotate_values"] = c.rotate_values;
  t["quantized_stream"] = c.quantized_stream;
  t["stream_numerics"] = c.stream_numerics;
  nlohmann::json j;
  j["quant_method"] = "qoq";
  j["method"] = "qoq";
  j["format_version"] = 1;
  j["precision"] = precision_name(c.precision);
  j["weight_bits"] = weight_bits(c.precision);
  j["activation_bits"] = activation_bits(c.precision);
  j["kv_bits"] = kv_bits(c.precision);
  j["group_size"] = c.group;
  j["weight_format"] = weight_format_name(c.format);
  j["modules_not_quantized"] = {"model.embed_tokens", "model.norm", "lm_head"};
  j["transforms"] = t;
  j["calibration"] = {{"text", c.calibration}, {"samples", c.calibration_samples}, {"seqlen", c.calibration_seqlen}};
  return j;
}

bool is_qoq_checkpoint(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("quantization_config")) return false;
  const auto& q = config["quantization_config"];
  return q.is_object() && q.contains("method") && q["method"] == "qoq";
}

namespace {

// qoq_config_from_json without the conversion of JSON type errors (a field of
// the wrong type: json::value() and get() throw nlohmann's exceptions).
QoqConfig parse_qoq_config(const nlohmann::json& j) {
  auto bad = [](const std::string& what) -> void {
    fail(ErrorCode::kCorruptData, "config.json quantization_config: {}", what);
  };
  if (!j.is_object()) bad("not an object");
  if (j.value("method", "") != "qoq") bad("method is not \"qoq\"");
  if (j.value("format_version", 0) != 1) bad("format_version is not 1");
  QoqConfig c;
  if (!j.contains("precision") || !j["precision"].is_string()) bad("'precision' missing");
  try {
    c.precision = parse_precision(j["precision"].get<std::string>());
  } catch (const Error& e) {
    bad(e.what());
  }
  if (!j.contains("group_size") || !j["group_size"].is_number_integer()) bad("'group_size' missing or not an integer");
  c.group = j["group_size"].get<int64_t>();
  if (c.group == 0 || c.group < -1 || (c.group > 0 && c.group % 2)) bad(fmt::format("group_size {} is invalid", c.group));
  if (!j.contains("weight_format") || !j["weight_format"].is_string()) bad("'weight_format' missing");
  c.format = parse_weight_format(j["weight_format"].get<std::string>());
  const WeightFormat want = weight_format_for(c.precision, c.group);
  if (c.format != want)
    bad(fmt::format("weight_format '{}' does not match precision {} with group_size {} (expected '{}')",
                    weight_format_name(c.format), precision_name(c.precision), c.group, weight_format_name(want)));
  for (auto [key, value] : {std::pair{"weight_bits", weight_bits(c.precision)},
                            std::pair{"activation_bits", activation_bits(c.precision)},
                            std::pair{"kv_bits", kv_bits(c.precision)}})
    if (j.value(key, -1) != value) bad(fmt::format("'{}' must be {} for {}", key, value, precision_name(c.precision)));
  if (j.contains("transforms") && j["transforms"].is_object()) {
    const auto& t = j["transforms"];
    c.fold_norms = t.value("fold_norms", false);
    if (t.contains("rotation") && t["rotation"].is_string()) c.rotation = t["rotation"].get<std::string>();
    auto alpha = [&](const char* k) { return t.contains(k) && t[k].is_object() ? t[k].value("alpha", 0.0) : 0.0; };
    c.smooth_attention_alpha = alpha("smooth_attention");
    c.smooth_attention_mean = c.smooth_attention_alpha > 0 && t["smooth_attention"].value("statistic", "max") == "mean";
    c.smooth_output_alpha = alpha("smooth_output");
    c.smooth_input_alpha = alpha("smooth_input");
    c.reorder = t.value("reorder", false);
    c.clip = t.value("clip", false);
    c.gptq = t.value("gptq", false);
    c.gptq_act_order = t.value("gptq_act_order", false);
    c.gptq_sequential = t.value("gptq_sequential", false);
    c.gptq_fp_target = t.value("gptq_fp_target", false);
    c.gptq_clip_search = t.value("gptq_clip_search", false);
    if (t.contains("gptq_clip_ratios") && t["gptq_clip_ratios"].is_array())
      c.gptq_clip_ratios = t["gptq_clip_ratios"].get<std::vector<float>>();
    c.rotate_values = t.value("rotate_values", false);
    c.quantized_stream = t.value("quantized_stream", false);
    c.stream_numerics = t.value("stream_numerics", false);
  }
  if (j.contains("calibration") && j["calibration"].is_object()) {
    c.calibration = j["calibration"].value("text", "");
    c.calibration_samples = j["calibration"].value("samples", 0);
    c.calibration_seqlen = j["calibration"].value("seqlen", 0);
  }
  return c;
}

}  // namespace

QoqConfig qoq_config_from_json(const nlohmann::json& j) {
  try {
    return parse_qoq_config(j);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "config.json quantization_config: a field has the wrong type ({})", e.what());
  }
}

std::vector<std::string> linear_tensor_names(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF16: return {"weight"};
    case WeightFormat::kW4G128: return {"qweight", "s1", "s2", "zero"};
    case WeightFormat::kW4PerChannel: return {"qweight", "scale", "zero"};
    case WeightFormat::kW8PerChannel: return {"qweight", "scale"};
    case WeightFormat::kW4A16: return {"qweight", "scale", "zero"};
  }
  return {};
}

QoqCheckpointWriter::QoqCheckpointWriter(std::string dir, int64_t num_shards)
    : dir_(std::move(dir)), num_shards_(num_shards) {}

std::string QoqCheckpointWriter::shard_name(int64_t i) const {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, num_shards_);
}

void QoqCheckpointWriter::add_block(int64_t l, const BlockWeights& w, WeightFormat format, int64_t group) {
  const Matrix* ms[7] = {&w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down};
  std::vector<QuantizedLinear> linears;
  for (const Matrix* m : ms) linears.push_back(quantize_linear(format, *m, group));
  add_quantized_block(l, linears, w);
}

void QoqCheckpointWriter::add_quantized_block(int64_t l, const std::vector<QuantizedLinear>& linears, const BlockWeights& w) {
  QS_CHECK(linears.size() == 7) << "a block has 7 linears, got " << linears.size();
  SafetensorsWriter out;
  const std::string p = "model.layers." + std::to_string(l) + ".";
  for (int i = 0; i < 7; ++i) {
    QS_CHECK(linears[i].format == linears[0].format) << "mixed weight formats in block " << l;
    add_linear(out, p + kLinears[i][0], linears[i]);
  }
  out.add(p + "input_layernorm.weight", f16_vector(w.attn_norm));
  out.add(p + "post_attention_layernorm.weight", f16_vector(w.mlp_norm));
  out.set_metadata("format", "pt");
  const std::string name = shard_name(next_shard_++);
  out.write((fs::path(dir_) / name).string());
  // The writer does not expose its entries; list the names again for the index.
  for (int i = 0; i < 7; ++i)
    for (const auto& t : linear_tensor_names(linears[0].format)) weight_map_[p + kLinears[i][0] + "." + t] = name;
  weight_map_[p + "input_layernorm.weight"] = name;
  weight_map_[p + "post_attention_layernorm.weight"] = name;
  total_bytes_ += fs::file_size(fs::path(dir_) / name);
}

void QoqCheckpointWriter::add_outer(const Tensor& embed, const Tensor& final_norm, const Tensor& lm_head) {
  SafetensorsWriter out;
  out.add("model.embed_tokens.weight", embed);
  out.add("model.norm.weight", final_norm);
  if (!lm_head.empty()) out.add("lm_head.weight", lm_head);
  out.set_metadata("format", "pt");
  const std::string name = shard_name(next_shard_++);
  out.write((fs::path(dir_) / name).string());
  weight_map_["model.embed_tokens.weight"] = name;
  weight_map_["model.norm.weight"] = name;
  if (!lm_head.empty()) weight_map_["lm_head.weight"] = name;
  total_bytes_ += fs::file_size(fs::path(dir_) / name);
}

void QoqCheckpointWriter::finish(const nlohmann::json& config) {
  QS_CHECK(next_shard_ == num_shards_) << "wrote " << next_shard_ << " of " << num_shards_ << " shards";
  auto write_json = [&](const std::string& file, const nlohmann::json& j) {
    const fs::path p = fs::path(dir_) / file;
    const fs::path tmp = p.string() + ".tmp";
    {
      std::ofstream os(tmp);
      os << j.dump(2) << "\n";
      if (!os) fail(ErrorCode::kIo, "cannot write {}", tmp.string());
    }
    fs::rename(tmp, p);
  };
  write_json("model.safetensors.index.json",
             {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", weight_map_}});
  write_json("config.json", config);
}

QuantizedLinear load_quantized_linear(const Checkpoint& c, const QoqConfig& qc, const std::string& p, int64_t n,
                                      int64_t k) {
  QuantizedLinear q;
  q.format = qc.format;
  q.n = n;
  q.k = k;
  q.group = qc.group > 0 ? qc.group : k;
  const int64_t groups = (k + q.group - 1) / q.group;
  if (q.format != WeightFormat::kF16 && k % 2)
    fail(ErrorCode::kCorruptData, "{}: '{}' has an odd input size {}", c.path(), p, k);
  switch (q.format) {
    case WeightFormat::kF16:
      q.f16 = copy_of<uint16_t>(expect(c, p + ".weight", DType::kF16, {n, k}));
      break;
    case WeightFormat::kW4G128: {
      auto& w = q.g128;
      w.n = n, w.k = k, w.group = q.group;
      w.qweight = copy_of<uint8_t>(expect(c, p + ".qweight", DType::kU8, {n, k / 2}));
      w.s1 = copy_of<uint16_t>(expect(c, p + ".s1", DType::kF16, {n}));
      w.s2 = copy_of<uint8_t>(expect(c, p + ".s2", DType::kU8, {n, groups}));
      w.zero = copy_of<uint8_t>(expect(c, p + ".zero", DType::kU8, {n, groups}));
      check_range(c, p + ".s2", w.s2, 1, 16);
      check_range(c, p + ".zero", w.zero, 0, 15);
      break;
    }
    case WeightFormat::kW4PerChannel: {
      auto& w = q.w4pc;
      w.n = n, w.k = k;
      w.qweight = copy_of<uint8_t>(expect(c, p + ".qweight", DType::kU8, {n, k / 2}));
      w.scale = copy_of<uint16_t>(expect(c, p + ".scale", DType::kF16, {n}));
      w.zero = copy_of<uint8_t>(expect(c, p + ".zero", DType::kU8, {n}));
      check_range(c, p + ".zero", w.zero, 0, 15);
      break;
    }
    case WeightFormat::kW8PerChannel: {
      auto& w = q.w8;
      w.n = n, w.k = k;
      w.q = copy_of<int8_t>(expect(c, p + ".qweight", DType::kI8, {n, k}));
      w.scale = copy_of<uint16_t>(expect(c, p + ".scale", DType::kF16, {n}));
      break;
    }
    case WeightFormat::kW4A16: {
      auto& w = q.w4a16;
      w.n = n, w.k = k, w.group = q.group;
      w.qweight = copy_of<uint8_t>(expect(c, p + ".qweight", DType::kU8, {n, k / 2}));
      w.scale = copy_of<uint16_t>(expect(c, p + ".scale", DType::kF16, {n, groups}));
      w.zero = copy_of<uint8_t>(expect(c, p + ".zero", DType::kU8, {n, groups}));
      check_range(c, p + ".zero", w.zero, 0, 15);
      break;
    }
  }
  return q;
}

QuantizedBlock load_quantized_block(const Checkpoint& c, const QoqConfig& qc, const LlamaShape& s, int64_t l) {
  const std::string p = "model.layers." + std::to_string(l) + ".";
  QuantizedBlock b;
  b.q = load_quantized_linear(c, qc, p + "self_attn.q_proj", s.q_dim(), s.hidden);
  b.k = load_quantized_linear(c, qc, p + "self_attn.k_proj", s.kv_dim(), s.hidden);
  b.v = load_quantized_linear(c, qc, p + "self_attn.v_proj", s.kv_dim(), s.hidden);
  b.o = load_quantized_linear(c, qc, p + "self_attn.o_proj", s.hidden, s.q_dim());
  b.gate = load_quantized_linear(c, qc, p + "mlp.gate_proj", s.intermediate, s.hidden);
  b.up = load_quantized_linear(c, qc, p + "mlp.up_proj", s.intermediate, s.hidden);
  b.down = load_quantized_linear(c, qc, p + "mlp.down_proj", s.hidden, s.intermediate);
  for (auto [name, dst] : {std::pair{"input_layernorm.weight", &b.attn_norm},
                           std::pair{"post_attention_layernorm.weight", &b.mlp_norm}}) {
    const Tensor t = expect(c, p + name, DType::kF16, {s.hidden});
    Tensor f = to_f32(t);
    dst->assign(f.data_as<float>(), f.data_as<float>() + s.hidden);
  }
  return b;
}

}  // namespace qserve::quant
