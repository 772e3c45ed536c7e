#include "backend/cpu/kv_quant_backend.h"

#include <fmt/format.h>

#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace qserve::cpu {
namespace {

class KvQuantBackend final : public Backend {
 public:
  KvQuantBackend(std::unique_ptr<Backend> inner, KvDtype dtype) : inner_(std::move(inner)), dtype_(dtype) {}
  std::string name() const override {
    return fmt::format("{} + kv{} cache", inner_->name(), kv_bits(dtype_));
  }
  DType float_dtype() const override { return inner_->float_dtype(); }
  BackendMemoryInfo memory_info() const override { return inner_->memory_info(); }
  Tensor alloc(DType dtype, std::vector<int64_t> shape) override { return inner_->alloc(dtype, std::move(shape)); }
  Tensor upload(const Tensor& host) override { return inner_->upload(host); }
  Tensor upload_table(const Tensor& host) override { return inner_->upload_table(host); }
  Tensor download(const Tensor& t) override { return inner_->download(t); }
  void copy(const Tensor& src, Tensor& dst) override { inner_->copy(src, dst); }
  void zero(Tensor& t) override { inner_->zero(t); }
  std::unique_ptr<Linear> make_linear(const Tensor& weight, const Tensor& bias) override {
    return inner_->make_linear(weight, bias);
  }
  std::unique_ptr<Linear> make_quantized_linear(quant::QuantizedLinear&& layer) override {
    return inner_->make_quantized_linear(std::move(layer));
  }
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override { inner_->embedding(table, ids, out); }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Activations& out) override {
    inner_->rms_norm(x, weight, eps, out);
  }
  void add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps, Activations& out) override {
    inner_->add_rms_norm(residual, delta, weight, eps, out);
  }
  void silu_mul(const Tensor& gate, const Tensor& up, Activations& out) override { inner_->silu_mul(gate, up, out); }
  bool supports_fused_projections() const override { return inner_->supports_fused_projections(); }
  void silu_mul_fused(const Tensor& gate_up, Activations& out) override { inner_->silu_mul_fused(gate_up, out); }
  // The q, k and v columns copied out, then this backend's rope_kv_write (which rewrites the slots quantized).
  void rope_kv_write_fused(const Tensor& qkv, Tensor& q_out, const RopeParams& rope, const AttentionBatch& batch,
                           KvLayer& kv) override {
    KvRows rows = split_qkv(qkv, q_out, batch.num_tokens(), kv.k.dim(1) * rope.head_dim);
    rope_kv_write(q_out, rows.k, rows.v, rope, batch, kv);
  }
  void quantize(const Tensor& x, Activations& out) override { inner_->quantize(x, out); }
  void add(Tensor& x, const Tensor& y) override { inner_->add(x, y); }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override { inner_->gather_rows(x, rows, out); }

  void rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const RopeParams& rope, const AttentionBatch& batch,
                     KvLayer& kv) override {
    QS_CHECK(inner_->float_dtype() == DType::kF32) << "the KV quantizing backend wraps an FP32 backend";
    // RoPE on q and k (in place) and an FP32 write; then the slots are
    // rewritten with the quantized values of the rotated k and of v.
    inner_->rope_kv_write(q, k, v, rope, batch, kv);
    const int64_t T = batch.num_tokens(), D = rope.head_dim, kv_heads = kv.k.dim(1);
    std::vector<float> kq(k.data_as<float>(), k.data_as<float>() + T * kv_heads * D);
    std::vector<float> vq(v.data_as<float>(), v.data_as<float>() + T * kv_heads * D);
    kv_fake_quantize(kq.data(), T * kv_heads, D, dtype_);
    kv_fake_quantize(vq.data(), T * kv_heads, D, dtype_);
    kv_write(kq.data(), vq.data(), T, kv_heads, D, batch, kv.k.data_as<float>(), kv.v.data_as<float>());
  }
  void attention(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale, Tensor& out) override {
    inner_->attention(q, kv, batch, scale, out);
  }

 private:
  std::unique_ptr<Backend> inner_;
  KvDtype dtype_;
};

}  // namespace

void kv_fake_quantize(float* x, int64_t vectors, int64_t head_dim, KvDtype dtype) {
  ThreadPool::global().parallel_for(vectors, [&](int64_t r0, int64_t r1) {
    std::vector<uint16_t> h(head_dim);
    std::vector<uint8_t> codes(head_dim);  // 8-bit codes use head_dim bytes, 4-bit half of it
    for (int64_t r = r0; r < r1; ++r) {
      float* v = x + r * head_dim;
      for (int64_t i = 0; i < head_dim; ++i) h[i] = float_to_half(v[i]);
      uint16_t scale = 0, zero = 0;
      kv_quantize_head(h.data(), static_cast<int>(head_dim), dtype, codes.data(), &scale, &zero);
      kv_dequantize_head(codes.data(), scale, zero, static_cast<int>(head_dim), dtype, v);
    }
  }, 16);
}

std::unique_ptr<Backend> make_kv_quant_backend(std::unique_ptr<Backend> inner, KvDtype dtype) {
  return std::make_unique<KvQuantBackend>(std::move(inner), dtype);
}

}  // namespace qserve::cpu
