#include "backend/cpu/fp16_activation_backend.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/half.h"

namespace qserve::cpu {

void round_activations_to_fp16(Tensor& t) {
  if (t.empty() || t.dtype() != DType::kF32) return;
  for (float& v : t.span<float>()) v = round_to_half(v);
}

float round_to_mantissa(float x, int bits) {
  if (bits >= 23 || !std::isfinite(x)) return x;
  const int shift = 23 - bits;
  uint32_t u = std::bit_cast<uint32_t>(x);
  u += ((1u << (shift - 1)) - 1) + ((u >> shift) & 1u);
  u &= ~((1u << shift) - 1);
  return std::bit_cast<float>(u);
}

namespace {

constexpr std::array<std::pair<std::string_view, Fp16Point>, 14> kPointNames = {{
    {"embed", Fp16Point::kEmbed},   {"residual", Fp16Point::kResidual}, {"norm", Fp16Point::kNorm},
    {"q", Fp16Point::kQ},           {"k", Fp16Point::kK},               {"v", Fp16Point::kV},
    {"q_rope", Fp16Point::kQRope},  {"attn", Fp16Point::kAttn},         {"o", Fp16Point::kO},
    {"gate", Fp16Point::kGate},     {"up", Fp16Point::kUp},             {"silu", Fp16Point::kSilu},
    {"down", Fp16Point::kDown},     {"logits", Fp16Point::kLogits},
}};

void round_values(Tensor& t, int mantissa_bits) {
  if (mantissa_bits == 0) return round_activations_to_fp16(t);
  if (t.empty() || t.dtype() != DType::kF32) return;
  for (float& v : t.span<float>()) v = round_to_mantissa(v, mantissa_bits);
}

// The linears in the order LlamaModel::create makes them: lm_head, then these per layer.
constexpr std::array<Fp16Point, 7> kLayerLinears = {Fp16Point::kQ,    Fp16Point::kK,  Fp16Point::kV,   Fp16Point::kO,
                                                    Fp16Point::kGate, Fp16Point::kUp, Fp16Point::kDown};

class Fp16RoundedLinear final : public Linear {
 public:
  Fp16RoundedLinear(std::unique_ptr<Linear> inner, bool round, int mantissa_bits)
      : inner_(std::move(inner)), round_(round), mantissa_bits_(mantissa_bits) {}
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  ActFormat input_format() const override { return inner_->input_format(); }
  void forward(const Activations& x, Tensor& y) const override {
    inner_->forward(x, y);
    if (round_) round_values(y, mantissa_bits_);
  }
  std::string describe() const override {
    return inner_->describe() + (round_ ? " (fp16 outputs)" : " (fp32 outputs)");
  }

 private:
  std::unique_ptr<Linear> inner_;
  bool round_;
  int mantissa_bits_;
};

class Fp16ActivationBackend final : public Backend {
 public:
  Fp16ActivationBackend(std::unique_ptr<Backend> inner, Fp16Points points)
      : inner_(std::move(inner)), points_(points) {}
  std::string name() const override {
    return inner_->name() + " + fp16 activations" +
           (points_.bits == Fp16Points::all().bits && points_.mantissa_bits == 0 ? "" : " (" + fp16_points_name(points_) + ")");
  }
  DType float_dtype() const override { return inner_->float_dtype(); }
  BackendMemoryInfo memory_info() const override { return inner_->memory_info(); }
  Tensor alloc(DType dtype, std::vector<int64_t> shape) override { return inner_->alloc(dtype, std::move(shape)); }
  KvLayer alloc_kv_layer(int64_t pages, int64_t page_size, int64_t kv_heads, int64_t head_dim) override {
    return inner_->alloc_kv_layer(pages, page_size, kv_heads, head_dim);
  }
  void zero_kv_pages(std::span<KvLayer> layers, std::span<const int32_t> pages) override {
    inner_->zero_kv_pages(layers, pages);
  }
  int64_t kv_layer_page_bytes(int64_t page_size, int64_t kv_heads, int64_t head_dim) const override {
    return inner_->kv_layer_page_bytes(page_size, kv_heads, head_dim);
  }
  Tensor upload(const Tensor& host) override { return inner_->upload(host); }
  Tensor upload_table(const Tensor& host) override { return inner_->upload_table(host); }
  Tensor download(const Tensor& t) override { return inner_->download(t); }
  void copy(const Tensor& src, Tensor& dst) override { inner_->copy(src, dst); }
  void zero(Tensor& t) override { inner_->zero(t); }
  std::unique_ptr<Linear> make_linear(const Tensor& weight, const Tensor& bias) override {
    return std::make_unique<Fp16RoundedLinear>(inner_->make_linear(weight, bias), next_linear_rounds(), points_.mantissa_bits);
  }
  std::unique_ptr<Linear> make_quantized_linear(quant::QuantizedLinear&& layer) override {
    return std::make_unique<Fp16RoundedLinear>(inner_->make_quantized_linear(std::move(layer)), next_linear_rounds(), points_.mantissa_bits);
  }
  void begin_step(const AttentionBatch& batch) override { inner_->begin_step(batch); }
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    inner_->embedding(table, ids, out);
    round_if(Fp16Point::kEmbed, out);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Activations& out) override {
    inner_->rms_norm(x, weight, eps, out);
    if (out.format == ActFormat::kFloat) round_if(Fp16Point::kNorm, out.values);
  }
  void add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps, Activations& out) override {
    add(residual, delta);
    rms_norm(residual, weight, eps, out);
  }
  void silu_mul(const Tensor& gate, const Tensor& up, Activations& out) override {
    inner_->silu_mul(gate, up, out);
    if (out.format == ActFormat::kFloat) round_if(Fp16Point::kSilu, out.values);
  }
  void quantize(const Tensor& x, Activations& out) override { inner_->quantize(x, out); }
  void add(Tensor& x, const Tensor& y) override {
    inner_->add(x, y);
    round_if(Fp16Point::kResidual, x);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override { inner_->gather_rows(x, rows, out); }
  void rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const RopeParams& rope, const AttentionBatch& batch,
                     KvLayer& kv) override {
    inner_->rope_kv_write(q, k, v, rope, batch, kv);
    round_if(Fp16Point::kQRope, q);
  }
  void attention(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale, Tensor& out) override {
    inner_->attention(q, kv, batch, scale, out);
    round_if(Fp16Point::kAttn, out);
  }

 private:
  void round_if(Fp16Point p, Tensor& t) const {
    if (points_.has(p)) round_values(t, points_.mantissa_bits);
  }
  // Whether the next linear made rounds its outputs (its role from the making order).
  bool next_linear_rounds() {
    const int64_t i = linears_made_++;
    return points_.has(i == 0 ? Fp16Point::kLogits : kLayerLinears[(i - 1) % kLayerLinears.size()]);
  }

  std::unique_ptr<Backend> inner_;
  Fp16Points points_;
  int64_t linears_made_ = 0;
};

}  // namespace

Fp16Points parse_fp16_points(std::string_view spec) {
  Fp16Points out;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find(',', start), spec.size());
    std::string_view tok = spec.substr(start, end - start);
    start = end + 1;
    const bool remove = !tok.empty() && tok.front() == '-';
    if (remove) tok.remove_prefix(1);
    uint32_t bits = 0;
    if (!remove && tok.starts_with("mantissa=")) {
      const std::string n(tok.substr(9));
      char* end = nullptr;
      const long v = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || v < 1 || v > 23)
        fail(ErrorCode::kInvalidArgument, "'{}' in '{}': mantissa bits between 1 and 23 expected", std::string(tok),
             std::string(spec));
      out.mantissa_bits = static_cast<int>(v);
      continue;
    }
    if (tok == "all") {
      bits = Fp16Points::all().bits;
    } else if (tok != "none") {
      for (const auto& [name, p] : kPointNames)
        if (name == tok) bits = static_cast<uint32_t>(p);
      if (bits == 0) {
        std::string names;
        for (const auto& [name, p] : kPointNames) names += (names.empty() ? "" : ", ") + std::string(name);
        fail(ErrorCode::kInvalidArgument, "unknown fp16 rounding point '{}' in '{}' (expected all, none or {})",
             std::string(tok), std::string(spec), names);
      }
    }
    out.bits = remove ? out.bits & ~bits : out.bits | bits;
  }
  return out;
}

std::string fp16_points_name(Fp16Points points) {
  std::string out;
  if (points.bits == Fp16Points::all().bits) {
    out = "all";
  } else if (points.bits == 0) {
    out = "none";
  } else {
    for (const auto& [name, p] : kPointNames)
      if (points.has(p)) out += (out.empty() ? "" : ",") + std::string(name);
  }
  if (points.mantissa_bits > 0) out += ",mantissa=" + std::to_string(points.mantissa_bits);
  return out;
}

std::unique_ptr<Backend> make_fp16_activation_backend(std::unique_ptr<Backend> inner, Fp16Points points) {
  return std::make_unique<Fp16ActivationBackend>(std::move(inner), points);
}

}  // namespace qserve::cpu
