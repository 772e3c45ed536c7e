#include "backend/cpu/fp16_activation_backend.h"

#include <string>
#include <utility>

#include "core/half.h"

namespace qserve::cpu {

void round_activations_to_fp16(Tensor& t) {
  if (t.empty() || t.dtype() != DType::kF32) return;
  for (float& v : t.span<float>()) v = round_to_half(v);
}

namespace {

class Fp16RoundedLinear final : public Linear {
 public:
  explicit Fp16RoundedLinear(std::unique_ptr<Linear> inner) : inner_(std::move(inner)) {}
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  ActFormat input_format() const override { return inner_->input_format(); }
  void forward(const Activations& x, Tensor& y) const override {
    inner_->forward(x, y);
    round_activations_to_fp16(y);
  }
  std::string describe() const override { return inner_->describe() + " (fp16 outputs)"; }

 private:
  std::unique_ptr<Linear> inner_;
};

class Fp16ActivationBackend final : public Backend {
 public:
  explicit Fp16ActivationBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name() + " + fp16 activations"; }
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
  Tensor download(const Tensor& t) override { return inner_->download(t); }
  void copy(const Tensor& src, Tensor& dst) override { inner_->copy(src, dst); }
  void zero(Tensor& t) override { inner_->zero(t); }
  std::unique_ptr<Linear> make_linear(const Tensor& weight, const Tensor& bias) override {
    return std::make_unique<Fp16RoundedLinear>(inner_->make_linear(weight, bias));
  }
  std::unique_ptr<Linear> make_quantized_linear(quant::QuantizedLinear&& layer) override {
    return std::make_unique<Fp16RoundedLinear>(inner_->make_quantized_linear(std::move(layer)));
  }
  void begin_step(const AttentionBatch& batch) override { inner_->begin_step(batch); }
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    inner_->embedding(table, ids, out);
    round_activations_to_fp16(out);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Activations& out) override {
    inner_->rms_norm(x, weight, eps, out);
    if (out.format == ActFormat::kFloat) round_activations_to_fp16(out.values);
  }
  void add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps, Activations& out) override {
    add(residual, delta);
    rms_norm(residual, weight, eps, out);
  }
  void silu_mul(const Tensor& gate, const Tensor& up, Activations& out) override {
    inner_->silu_mul(gate, up, out);
    if (out.format == ActFormat::kFloat) round_activations_to_fp16(out.values);
  }
  void quantize(const Tensor& x, Activations& out) override { inner_->quantize(x, out); }
  void add(Tensor& x, const Tensor& y) override {
    inner_->add(x, y);
    round_activations_to_fp16(x);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override { inner_->gather_rows(x, rows, out); }
  void rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const RopeParams& rope, const AttentionBatch& batch,
                     KvLayer& kv) override {
    inner_->rope_kv_write(q, k, v, rope, batch, kv);
    round_activations_to_fp16(q);
  }
  void attention(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale, Tensor& out) override {
    inner_->attention(q, kv, batch, scale, out);
    round_activations_to_fp16(out);
  }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace

std::unique_ptr<Backend> make_fp16_activation_backend(std::unique_ptr<Backend> inner) {
  return std::make_unique<Fp16ActivationBackend>(std::move(inner));
}

}  // namespace qserve::cpu
