#include "quant/quantizer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/half.h"
#include "model/safetensors.h"
#include "quant/calib_forward.h"
#include "quant/channel_reorder.h"
#include "quant/fold_norm.h"
#include "quant/gptq.h"
#include "quant/gptq_block.h"
#include "quant/qoq_checkpoint.h"
#include "quant/quant_linear.h"
#include "quant/rotate.h"
#include "quant/rotate_value.h"
#include "quant/smooth_attention.h"
#include "quant/smooth_output.h"
#include "quant/weight_clip.h"

namespace qserve::quant {
namespace fs = std::filesystem;
namespace {

int64_t cfg_int(const nlohmann::json& c, const char* key) {
  if (!c.contains(key) || !c[key].is_number_integer())
    fail(ErrorCode::kCorruptData, "config.json: '{}' is missing or not an integer", key);
  return c[key].get<int64_t>();
}

// Gives the pages of a memory-mapped tensor back to the kernel once it has been
// converted (RSS stays near one block instead of growing to the whole file).
void drop_pages(const Tensor& t) {
  const long page = sysconf(_SC_PAGESIZE);
  uintptr_t begin = reinterpret_cast<uintptr_t>(t.data());
  uintptr_t end = begin + t.nbytes();
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Matrix load_matrix(const Checkpoint& in, const std::string& name, int64_t rows, int64_t cols) {
  const Tensor& t = in.get(name);
  if (t.rank() != 2 || t.dim(0) != rows || t.dim(1) != cols)
    fail(ErrorCode::kCorruptData, "{}: tensor '{}' is {}, expected [{}, {}]", in.path(), name, t.describe(), rows, cols);
  Tensor f = to_f32(t);
  if (in.is_directory()) drop_pages(t);
  Matrix m(rows, cols);
  std::copy_n(f.data_as<float>(), rows * cols, m.data.data());
  return m;
}

std::vector<float> load_vector(const Checkpoint& in, const std::string& name, int64_t n) {
  const Tensor& t = in.get(name);
  if (t.rank() != 1 || t.dim(0) != n)
    fail(ErrorCode::kCorruptData, "{}: tensor '{}' is {}, expected [{}]", in.path(), name, t.describe(), n);
  Tensor f = to_f32(t);
  return std::vector<float>(f.data_as<float>(), f.data_as<float>() + n);
}

BlockWeights load_block(const Checkpoint& in, const LlamaShape& s, int64_t l) {
  const std::string p = "model.layers." + std::to_string(l) + ".";
  BlockWeights w;
  w.q = load_matrix(in, p + "self_attn.q_proj.weight", s.q_dim(), s.hidden);
  w.k = load_matrix(in, p + "self_attn.k_proj.weight", s.kv_dim(), s.hidden);
  w.v = load_matrix(in, p + "self_attn.v_proj.weight", s.kv_dim(), s.hidden);
  w.o = load_matrix(in, p + "self_attn.o_proj.weight", s.hidden, s.q_dim());
  w.gate = load_matrix(in, p + "mlp.gate_proj.weight", s.intermediate, s.hidden);
  w.up = load_matrix(in, p + "mlp.up_proj.weight", s.intermediate, s.hidden);
  w.down = load_matrix(in, p + "mlp.down_proj.weight", s.hidden, s.intermediate);
  w.attn_norm = load_vector(in, p + "input_layernorm.weight", s.hidden);
  w.mlp_norm = load_vector(in, p + "post_attention_layernorm.weight", s.hidden);
  return w;
}

// Converts a [rows, cols] tensor to an fp16 [rows, cols] tensor in chunks of
// rows, applying fn to each FP32 chunk first (so no FP32 copy of the whole matrix).
Tensor rows_to_f16(const Checkpoint& in, const std::string& name, int64_t rows, int64_t cols,
                   const std::function<void(float*, int64_t)>& fn) {
  const Tensor& src = in.get(name);
  if (src.rank() != 2 || src.dim(0) != rows || src.dim(1) != cols)
    fail(ErrorCode::kCorruptData, "{}: tensor '{}' is {}, expected [{}, {}]", in.path(), name, src.describe(), rows, cols);
  Tensor out = Tensor::zeros(DType::kF16, {rows, cols});
  uint16_t* dst = out.data_as<uint16_t>();
  constexpr int64_t kChunk = 1024;
  const size_t row_bytes = dtype_row_bytes(src.dtype(), cols);  // (any stored type, block formats too)
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int64_t nr = std::min(kChunk, rows - r0);
    Tensor view(src.dtype(), {nr, cols}, const_cast<uint8_t*>(static_cast<const uint8_t*>(src.data())) + r0 * row_bytes);
    Tensor f = to_f32(view);
    fn(f.data_as<float>(), nr);
    for (int64_t i = 0; i < nr * cols; ++i) dst[r0 * cols + i] = float_to_half(f.data_as<float>()[i]);
    if (in.is_directory()) drop_pages(view);
  }
  return out;
}

Tensor vector_to_f16(const std::vector<float>& v) {
  Tensor t = Tensor::zeros(DType::kF16, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<uint16_t>()[i] = float_to_half(v[i]);
  return t;
}

void divide_columns(Matrix& m, const std::vector<float>& l) {
  std::vector<float> inv(l.size());
  for (size_t i = 0; i < l.size(); ++i) inv[i] = 1.0f / l[i];
  if (m.rows > 0) scale_columns(m, inv);
}

void divide(std::vector<float>& v, const std::vector<float>& l) {
  for (size_t i = 0; i < v.size(); ++i) v[i] /= l[i];
}

void copy_tokenizer_files(const Checkpoint& in, const fs::path& out) {
  static const char* kFiles[] = {"tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                                 "special_tokens_map.json", "generation_config.json", "vocab.json",
                                 "merges.txt", "added_tokens.json", "chat_template.jinja"};
  for (const char* f : kFiles) {
    if (in.is_directory()) {
      const fs::path src = fs::path(in.path()) / f;
      std::error_code ec;
      if (fs::is_regular_file(src, ec)) fs::copy_file(src, out / f, fs::copy_options::overwrite_existing);
    } else if (auto j = in.json_file(f)) {
      std::ofstream os(out / f);
      os << j->dump(2) << "\n";
      if (!os) fail(ErrorCode::kIo, "cannot write {}", (out / f).string());
    }
  }
}

}  // namespace

LlamaShape llama_shape_from_config(const nlohmann::json& c) {
  LlamaShape s;
  s.hidden = cfg_int(c, "hidden_size");
  s.intermediate = cfg_int(c, "intermediate_size");
  s.n_heads = cfg_int(c, "num_attention_heads");
  s.n_kv_heads = c.contains("num_key_value_heads") ? cfg_int(c, "num_key_value_heads") : s.n_heads;
  s.head_dim = c.contains("head_dim") && c["head_dim"].is_number_integer() ? c["head_dim"].get<int64_t>()
                                                                           : s.hidden / std::max<int64_t>(1, s.n_heads);
  s.vocab = cfg_int(c, "vocab_size");
  s.n_layers = cfg_int(c, "num_hidden_layers");
  if (c.contains("rope_theta") && c["rope_theta"].is_number()) s.rope_theta = c["rope_theta"].get<double>();
  if (c.contains("rms_norm_eps") && c["rms_norm_eps"].is_number()) s.rms_eps = c["rms_norm_eps"].get<double>();
  if (c.contains("rope_interleaved") && c["rope_interleaved"].is_boolean()) s.rope_interleaved = c["rope_interleaved"].get<bool>();
  s.tie_embeddings = c.value("tie_word_embeddings", false);
  if (s.hidden <= 0 || s.intermediate <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.head_dim <= 0 ||
      s.vocab <= 0 || s.n_layers <= 0 || s.n_heads % s.n_kv_heads != 0 || s.head_dim % 2 != 0)
    fail(ErrorCode::kCorruptData, "config.json: inconsistent Llama shape (hidden {}, heads {}/{}, head_dim {})",
         s.hidden, s.n_heads, s.n_kv_heads, s.head_dim);
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    fail(ErrorCode::kUnsupported, "config.json: rope_scaling is not supported by the quantizer");
  return s;
}

LayerReport transform_block(const LlamaShape& s, BlockWeights& w, BlockTaps& taps, const QuantizeOptions& opt,
                            BlockWeights* unclipped) {
  LayerReport rep;
  const WeightFormat fmt = weight_format_for(opt.precision, opt.group);
  rep.key_outlier_before = rep.key_outlier_after = key_outlier_ratio(taps.max_k);
  if (opt.smooth_attention && !taps.max_k.empty()) {
    std::vector<float> stat = taps.max_k;
    if (opt.smooth_attention_mean && taps.tokens > 0 && taps.k_abs_sum.size() == stat.size())
      for (size_t i = 0; i < stat.size(); ++i) stat[i] = taps.k_abs_sum[i] / static_cast<float>(taps.tokens);
    const std::vector<float> l = smooth_attention_scales(s, stat, opt.smooth_attention_alpha);
    apply_smooth_attention(s, w, l);
    divide(taps.max_k, l);
    rep.key_outlier_after = key_outlier_ratio(taps.max_k);
  }
  if (opt.smooth_input && !taps.max_attn_in.empty()) {
    std::vector<float> l = smooth_norm_inputs(w.attn_norm, {&w.q, &w.k, &w.v}, taps.max_attn_in, opt.smooth_input_alpha);
    divide(taps.max_attn_in, l);
    divide_columns(taps.attn_in, l);
    l = smooth_norm_inputs(w.mlp_norm, {&w.gate, &w.up}, taps.max_mlp_in, opt.smooth_input_alpha);
    divide(taps.max_mlp_in, l);
    divide_columns(taps.mlp_in, l);
  }
  if (opt.smooth_output && !taps.max_down_in.empty()) {
    std::vector<float> l = smooth_down(w, taps.max_down_in, opt.smooth_output_alpha);
    divide(taps.max_down_in, l);
    divide_columns(taps.down_in, l);
    const std::vector<float> lv = smooth_o_v(s, w, taps.max_o_in, opt.smooth_output_alpha);  // [kv_dim]
    std::vector<float> lo(s.q_dim());
    for (int64_t h = 0; h < s.n_heads; ++h)
      for (int64_t c = 0; c < s.head_dim; ++c) lo[h * s.head_dim + c] = lv[(h / s.group()) * s.head_dim + c];
    divide(taps.max_o_in, lo);
    divide_columns(taps.o_in, lo);
  }
  if (opt.reorder && (fmt == WeightFormat::kW4G128 || fmt == WeightFormat::kW4A16) && !taps.max_down_in.empty()) {
    const std::vector<int64_t> perm = salience_order(taps.max_down_in);
    reorder_mlp_channels(w, perm);
    taps.max_down_in = permute(taps.max_down_in, perm);
    if (taps.down_in.rows > 0) permute_columns(taps.down_in, perm);
  }
  if (unclipped) *unclipped = w;
  if (opt.clip && fmt != WeightFormat::kF16 && taps.attn_in.rows > 0) {
    const int64_t g = opt.group > 0 ? opt.group : 0;
    double sum = 0;
    sum += clip_weights(fmt, g, w.q, taps.attn_in);
    sum += clip_weights(fmt, g, w.k, taps.attn_in);
    sum += clip_weights(fmt, g, w.v, taps.attn_in);
    sum += clip_weights(fmt, g, w.o, taps.o_in);
    sum += clip_weights(fmt, g, w.gate, taps.mlp_in);
    sum += clip_weights(fmt, g, w.up, taps.mlp_in);
    sum += clip_weights(fmt, g, w.down, taps.down_in);
    rep.mean_clip_ratio = sum / 7;
  }
  return rep;
}

std::vector<QuantizedLinear> quantize_block(const BlockWeights& w, const BlockWeights& targets, const BlockTaps& taps,
                                            const QuantizeOptions& opt, LayerReport* report) {
  const WeightFormat fmt = weight_format_for(opt.precision, opt.group);
  const Matrix* grid[7] = {&w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down};
  const Matrix* target[7] = {&targets.q, &targets.k, &targets.v, &targets.o, &targets.gate, &targets.up, &targets.down};
  const Matrix* inputs[7] = {&taps.attn_in, &taps.attn_in, &taps.attn_in, &taps.o_in, &taps.mlp_in, &taps.mlp_in, &taps.down_in};
  std::vector<QuantizedLinear> out;
  const bool gptq = opt.gptq && fmt != WeightFormat::kF16;
  double ratio_sum = 0;
  std::unique_ptr<GptqFactor> factor;
  const Matrix* factor_of = nullptr;
  for (int i = 0; i < 7; ++i) {
    out.push_back(quantize_linear(fmt, *grid[i], opt.group));
    if (!gptq) continue;
    QS_CHECK(inputs[i]->rows > 0) << "GPTQ needs calibration rows";
    if (factor_of != inputs[i]) {  // q/k/v and gate/up share their input (and H)
      factor = std::make_unique<GptqFactor>(gptq_factor(*inputs[i], {.damp = opt.gptq_damp, .act_order = opt.gptq_act_order, .row_cap = opt.gptq_row_cap}));
      factor_of = inputs[i];
    }
    const double rtn = layer_output_error(*inputs[i], *target[i], out.back());
    gptq_requantize(out.back(), *target[i], *factor);
    const double err = layer_output_error(*inputs[i], *target[i], out.back());
    ratio_sum += rtn > 0 ? err / rtn : 1.0;
  }
  if (report && gptq) report->gptq_error_ratio = ratio_sum / 7;
  return out;
}

QuantizeReport quantize_checkpoint(const Checkpoint& in, const std::string& out_dir, const QuantizeOptions& opt_in) {
  const auto t0 = std::chrono::steady_clock::now();
  QuantizeOptions opt = opt_in;
  const LlamaShape s = llama_shape_from_config(in.config());
  const bool transform = opt.precision != Precision::kFP16;
  if (!transform) opt.rotate = opt.smooth_attention = opt.smooth_output = opt.smooth_input = opt.reorder = opt.clip = false;
  if (opt.precision != Precision::kW4A8KV4 && opt.precision != Precision::kW4A8KV8 && opt.group <= 0)
    fail(ErrorCode::kInvalidArgument, "--group-size -1 (per channel) applies to w4a8 precisions only");
  if (opt.rotate) opt.fold_norms = true;
  const WeightFormat fmt = weight_format_for(opt.precision, opt.group);
  if (fmt != WeightFormat::kF16 && (s.hidden % 2 || s.intermediate % 2 || s.q_dim() % 2))
    fail(ErrorCode::kUnsupported, "4-bit packing needs even input sizes (hidden {}, intermediate {})", s.hidden, s.intermediate);
  if (fmt == WeightFormat::kF16) opt.gptq = false;
  const bool need_calib = opt.smooth_attention || opt.smooth_output || opt.smooth_input || opt.reorder || opt.clip || opt.gptq;
  if (need_calib && opt.calibration.empty())
    fail(ErrorCode::kInvalidArgument, "the enabled QoQ steps need calibration text (--calib-text)");
  const int64_t n_seq = need_calib ? static_cast<int64_t>(opt.calibration.size()) : 0;
  const int64_t seqlen = n_seq ? static_cast<int64_t>(opt.calibration[0].size()) : 0;
  for (int64_t q = 0; q < n_seq; ++q)
    if (static_cast<int64_t>(opt.calibration[q].size()) != seqlen) fail(ErrorCode::kInvalidArgument, "calibration sequences differ in length");

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail(ErrorCode::kIo, "cannot create {}: {}", out_dir, ec.message());
  auto progress = [&](int64_t l, const std::string& stage) {
    if (opt.progress) opt.progress(l, s.n_layers, stage);
  };
  std::unique_ptr<Rotation> rot;
  if (opt.rotate) rot = std::make_unique<Rotation>(s.hidden, opt.rotation_seed);

  // Embedding: rotated, stored fp16; the calibration stream starts from it.
  progress(-1, "embedding");
  Tensor embed = rows_to_f16(in, "model.embed_tokens.weight", s.vocab, s.hidden, [&](float* x, int64_t rows) {
    if (rot) rot->apply_right(x, rows);
  });
  std::vector<float> h(static_cast<size_t>(n_seq * seqlen * s.hidden));
  for (int64_t q = 0; q < n_seq; ++q)
    for (int64_t t = 0; t < seqlen; ++t) {
      const int32_t tok = opt.calibration[q][t];
      if (tok < 0 || tok >= s.vocab) fail(ErrorCode::kInvalidArgument, "calibration token {} outside the vocabulary", tok);
      const uint16_t* e = embed.data_as<uint16_t>() + static_cast<int64_t>(tok) * s.hidden;
      float* dst = h.data() + (q * seqlen + t) * s.hidden;
      for (int64_t i = 0; i < s.hidden; ++i) dst[i] = half_to_float(e[i]);
    }

  if (!opt.gptq) opt.gptq_sequential = opt.gptq_fp_target = opt.gptq_clip_search = false;
  // The FP model's residual stream (asymmetric calibration: the targets of GPTQ).
  std::vector<float> h_fp;
  if (opt.gptq_fp_target && n_seq) h_fp = h;

  QuantizeReport report;
  QoqCheckpointWriter writer(out_dir, s.n_layers + 1);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    progress(l, "load");
    BlockWeights w = load_block(in, s, l);
    if (opt.fold_norms && transform) fold_block_norms(w);
    if (rot) {
      progress(l, "rotate");
      rotate_block(*rot, w);
    }
    if (opt.rotate_values && transform) rotate_value_heads(s, w, opt.rotation_seed);
    BlockTaps taps;
    taps.keep_every = std::max<int64_t>(1, n_seq * seqlen / (opt.gptq ? opt.gptq_rows : 1024));
    std::vector<float> h_in;  // the block's input, kept to run the quantized block on it
    if (n_seq && (opt.quantized_stream || opt.gptq_sequential)) h_in = h;
    if (n_seq) {
      progress(l, "calibrate");
      block_forward(s, w, h.data(), n_seq, seqlen, &taps);
    }
    progress(l, "transform");
    BlockWeights targets;
    const bool gptq = opt.gptq && fmt != WeightFormat::kF16;
    report.layers.push_back(transform_block(s, w, taps, opt, gptq && opt.clip ? &targets : nullptr));
    progress(l, gptq ? "gptq" : "quantize");
    std::vector<QuantizedLinear> ql;
    if (gptq && n_seq && (opt.gptq_sequential || opt.gptq_fp_target || opt.gptq_clip_search)) {
      const BlockWeights& fp = opt.clip ? targets : w;
      BlockTaps fp_taps;
      if (opt.gptq_fp_target) {  // the FP block (transformed, unclipped) on the FP stream: same rows, same basis
        progress(l, "fp stream");
        fp_taps.keep_every = taps.keep_every;
        block_forward(s, fp, h_fp.data(), n_seq, seqlen, &fp_taps);
      }
      ql = quantize_block_staged(s, w, fp, taps, h_in, n_seq, seqlen, opt.gptq_fp_target ? &fp_taps : nullptr, opt,
                                 &report.layers.back());
    } else {
      ql = quantize_block(w, gptq && opt.clip ? targets : w, taps, opt, &report.layers.back());
    }
    if (!h_in.empty() && opt.quantized_stream) {
      // The next block's calibration input: this block's output with its weights as quantized.
      progress(l, "quantized stream");
      BlockWeights wq = w;
      Matrix* ms[7] = {&wq.q, &wq.k, &wq.v, &wq.o, &wq.gate, &wq.up, &wq.down};
      for (int i = 0; i < 7; ++i) ms[i]->data = dequantize_linear(ql[i]);
      h.swap(h_in);
      ForwardNumerics num;
      if (opt.stream_numerics) {
        num.a8 = activation_bits(opt.precision) == 8;
        num.kv_bits = kv_bits(opt.precision) < 16 ? kv_bits(opt.precision) : 0;
      }
      block_forward(s, wq, h.data(), n_seq, seqlen, nullptr, num);
    }
    writer.add_quantized_block(l, std::move(ql), w);
  }
  progress(-1, "lm_head");
  // lm_head: the untied copy when the norm is folded (or the model is untied).
  const bool untie = opt.fold_norms && transform;
  std::vector<float> final_norm = load_vector(in, "model.norm.weight", s.hidden);
  const std::string lm_name = in.has("lm_head.weight") ? "lm_head.weight" : "model.embed_tokens.weight";
  Tensor lm_head;
  if (untie || in.has("lm_head.weight")) {
    lm_head = rows_to_f16(in, lm_name, s.vocab, s.hidden, [&](float* x, int64_t rows) {
      if (untie)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < s.hidden; ++i) x[r * s.hidden + i] *= final_norm[i];
      if (rot) rot->apply_right(x, rows);
    });
    if (untie) std::fill(final_norm.begin(), final_norm.end(), 1.0f);
  }
  writer.add_outer(embed, vector_to_f16(final_norm), lm_head);

  QoqConfig qc;
  qc.precision = opt.precision;
  qc.group = fmt == WeightFormat::kW4PerChannel || fmt == WeightFormat::kW8PerChannel || fmt == WeightFormat::kF16 ? -1 : opt.group;
  qc.format = fmt;
  qc.fold_norms = opt.fold_norms && transform;
  qc.rotation = rot ? rot->describe() : "";
  qc.smooth_attention_alpha = opt.smooth_attention ? opt.smooth_attention_alpha : 0;
  qc.smooth_output_alpha = opt.smooth_output ? opt.smooth_output_alpha : 0;
  qc.smooth_input_alpha = opt.smooth_input ? opt.smooth_input_alpha : 0;
  qc.reorder = opt.reorder && (fmt == WeightFormat::kW4G128 || fmt == WeightFormat::kW4A16);
  qc.clip = opt.clip;
  qc.smooth_attention_mean = opt.smooth_attention && opt.smooth_attention_mean;
  qc.rotate_values = opt.rotate_values && transform;
  qc.quantized_stream = opt.quantized_stream && n_seq > 0;
  qc.stream_numerics = qc.quantized_stream && opt.stream_numerics;
  qc.gptq = opt.gptq;
  qc.gptq_act_order = opt.gptq && opt.gptq_act_order;
  qc.gptq_sequential = opt.gptq && opt.gptq_sequential && n_seq > 0;
  qc.gptq_fp_target = opt.gptq && opt.gptq_fp_target && n_seq > 0;
  qc.gptq_clip_search = opt.gptq && opt.gptq_clip_search && n_seq > 0 && fmt == WeightFormat::kW4G128;
  if (qc.gptq_clip_search) qc.gptq_clip_ratios = opt.gptq_clip_ratios;
  qc.calibration = opt.calibration_name;
  qc.calibration_samples = n_seq;
  qc.calibration_seqlen = seqlen;
  nlohmann::json config = in.config();
  config["tie_word_embeddings"] = !lm_head.empty() ? false : s.tie_embeddings;
  config["torch_dtype"] = "float16";
  config["quantization_config"] = qoq_config_to_json(qc);
  writer.finish(config);
  copy_tokenizer_files(in, out_dir);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace qserve::quant
