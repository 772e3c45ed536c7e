// The CPU FP32 backend: Backend ops on host memory, reference ops from
// cpu_ops.h, linear layers through matmul.h (SIMD or scalar).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quant_linear_cpu.h"
#include "core/thread_pool.h"

namespace qserve {
namespace {

// Stored types the CPU reads in place, widening exactly as it goes (the fast
// matmul's weights, embedding()'s rows): F16, BF16 and the GGUF block formats.
bool read_in_place(DType d) { return d == DType::kF16 || d == DType::kBF16 || dtype_is_blocked(d); }

void check_f32(const Tensor& t, const char* what) {
  QS_CHECK(!t.empty() && t.dtype() == DType::kF32) << what << ": expected an F32 tensor, got " << t.describe();
}

class CpuLinear final : public Linear {
 public:
  CpuLinear(Tensor weight, Tensor bias, bool fast) : weight_(std::move(weight)), bias_(std::move(bias)), fast_(fast) {}
  int64_t in_features() const override { return weight_.dim(1); }
  int64_t out_features() const override { return weight_.dim(0); }
  ActFormat input_format() const override { return ActFormat::kFloat; }
  void forward(const Activations& x, Tensor& y) const override {
    QS_CHECK(x.format == ActFormat::kFloat) << "fp32 linear fed " << act_format_name(x.format);
    QS_CHECK(x.dim() == in_features() && y.dim(0) == x.tokens() && y.dim(1) == out_features())
        << describe() << ": x " << x.values.describe() << ", y " << y.describe();
    const float* b = bias_.empty() ? nullptr : bias_.data_as<float>();
    if (fast_) {
      matmul_f32_fast(x.values.data_as<float>(), weight_.data(), weight_.dtype(), b, y.data_as<float>(), x.tokens(),
                      in_features(), out_features());
    } else {
      matmul_f32_ref(x.values.data_as<float>(), weight_.data_as<float>(), b, y.data_as<float>(), x.tokens(), in_features(),
                     out_features());
    }
  }
  std::string describe() const override {
    return fmt::format("fp32 [{} -> {}]{}{}", in_features(), out_features(), bias_.empty() ? "" : " + bias",
                       weight_.dtype() == DType::kF32 ? "" : fmt::format(" ({} weights)", dtype_name(weight_.dtype())));
  }

 private:
  // [out, in]: f32; on the fast path F16 / BF16 checkpoint weights and GGUF
  // blocks stay as they are (widened exactly in registers: the same numbers,
  // 1/2 to 1/7 of the bytes).
  Tensor weight_;
  Tensor bias_;    // [out] f32 or empty
  bool fast_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(bool fast) : fast_(fast) {}

  std::string name() const override {
    return fmt::format("cpu-fp32 ({} matmul, {} threads)", fast_ ? matmul_f32_fast_isa() : "scalar",
                       ThreadPool::global().num_threads());
  }
  DType float_dtype() const override { return DType::kF32; }

  Tensor alloc(DType dtype, std::vector<int64_t> shape) override { return Tensor::zeros(dtype, std::move(shape)); }
  Tensor upload(const Tensor& host) override {
    if (host.dtype() == DType::kF32) return host;  // host memory already: share it (no copy)
    return to_f32(host);
  }
  // The embedding table as stored where embedding() reads its rows: a looked-up
  // row is widened exactly, so the rows are the upload()ed table's.
  Tensor upload_table(const Tensor& host) override {
    return host.rank() == 2 && read_in_place(host.dtype()) ? host : upload(host);
  }
  Tensor download(const Tensor& t) override { return to_f32(t); }
  void copy(const Tensor& src, Tensor& dst) override {
    QS_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel()) << src.describe() << " -> " << dst.describe();
    std::memcpy(dst.data(), src.data(), src.nbytes());
  }

  void zero(Tensor& t) override { std::memset(t.data(), 0, t.nbytes()); }

  std::unique_ptr<Linear> make_linear(const Tensor& weight, const Tensor& bias) override {
    QS_CHECK(weight.rank() == 2) << "linear weight " << weight.describe();
    Tensor w = fast_ && read_in_place(weight.dtype()) ? weight : upload(weight);
    Tensor b;
    if (!bias.empty()) {
      QS_CHECK(bias.rank() == 1 && bias.dim(0) == weight.dim(0)) << "bias " << bias.describe() << " for " << weight.describe();
      b = upload(bias);
    }
    return std::make_unique<CpuLinear>(std::move(w), std::move(b), fast_);
  }

  std::unique_ptr<Linear> make_quantized_linear(quant::QuantizedLinear&& layer) override {
    return cpu::make_quantized_linear(*this, std::move(layer));
  }
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    QS_CHECK(table.rank() == 2) << "embedding table " << table.describe();
    const int64_t T = ids.numel(), H = table.dim(1), V = table.dim(0);
    QS_CHECK(ids.dtype() == DType::kI32 && out.dim(0) == T && out.dim(1) == H);
    const int32_t* id = ids.data_as<int32_t>();
    const size_t row_bytes = dtype_row_bytes(table.dtype(), H);
    for (int64_t t = 0; t < T; ++t) {
      QS_CHECK(id[t] >= 0 && id[t] < V) << "token id " << id[t] << " outside [0, " << V << ")";
      // F32, or F16 / BF16 / GGUF blocks kept by upload_table: the row widened exactly
      widen_to_f32(table.dtype(), static_cast<const uint8_t*>(table.data()) + id[t] * row_bytes, out.data_as<float>() + t * H, H);
    }
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Activations& out) override {
    check_f32(x, "rms_norm x");
    const int64_t T = x.dim(0), H = x.dim(1);
    QS_CHECK(weight.numel() == H && out.tokens() == T && out.dim() == H);
    if (out.format == ActFormat::kFloat) {
      cpu::rms_norm_rows(x.data_as<float>(), weight.data_as<float>(), eps, T, H, out.values.data_as<float>());
      return;
    }
    std::vector<float> tmp(T * H);
    cpu::rms_norm_rows(x.data_as<float>(), weight.data_as<float>(), eps, T, H, tmp.data());
    for (int64_t t = 0; t < T; ++t) cpu::write_activation_row(tmp.data() + t * H, H, t, out);
  }

  void add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps, Activations& out) override {
    add(residual, delta);
    rms_norm(residual, weight, eps, out);
  }

  bool supports_fused_projections() const override { return true; }

  // The rows gate | up of one GEMM output; the same arithmetic as silu_mul.
  void silu_mul_fused(const Tensor& gate_up, Activations& out) override {
    check_f32(gate_up, "silu_mul gate_up");
    const int64_t T = gate_up.dim(0), I = gate_up.dim(1) / 2;
    QS_CHECK(gate_up.dim(1) == 2 * I && out.tokens() == T && out.dim() == I) << gate_up.describe();
    silu_mul_rows(gate_up.data_as<float>(), gate_up.data_as<float>() + I, 2 * I, T, I, out);
  }

  void silu_mul(const Tensor& gate, const Tensor& up, Activations& out) override {
    check_f32(gate, "silu_mul gate");
    check_f32(up, "silu_mul up");
    const int64_t T = gate.dim(0), I = gate.dim(1);
    QS_CHECK(up.dim(0) == T && up.dim(1) == I && out.tokens() == T && out.dim() == I);
    silu_mul_rows(gate.data_as<float>(), up.data_as<float>(), I, T, I, out);
  }

  void quantize(const Tensor& x, Activations& out) override {
    check_f32(x, "quantize x");
    const int64_t T = x.dim(0), K = x.dim(1);
    QS_CHECK(out.tokens() == T && out.dim() == K);
    for (int64_t t = 0; t < T; ++t) cpu::write_activation_row(x.data_as<float>() + t * K, K, t, out);
  }

  void add(Tensor& x, const Tensor& y) override {
    check_f32(x, "add x");
    check_f32(y, "add y");
    QS_CHECK(x.numel() == y.numel()) << x.describe() << " + " << y.describe();
    float* a = x.data_as<float>();
    const float* b = y.data_as<float>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) a[i] += b[i];
  }

  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    check_f32(x, "gather_rows x");
    const int64_t R = rows.numel(), H = x.dim(1);
    QS_CHECK(rows.dtype() == DType::kI32 && out.dim(0) == R && out.dim(1) == H);
    for (int64_t r = 0; r < R; ++r) {
      const int32_t src = rows.data_as<int32_t>()[r];
      QS_CHECK(src >= 0 && src < x.dim(0));
      std::memcpy(out.data_as<float>() + r * H, x.data_as<float>() + src * H, H * sizeof(float));
    }
  }

  // The q, k and v columns of each row copied out, then rope_kv_write.
  void rope_kv_write_fused(const Tensor& qkv, Tensor& q_out, const RopeParams& rope, const AttentionBatch& batch,
                           KvLayer& kv) override {
    cpu::KvRows rows = cpu::split_qkv(qkv, q_out, batch.num_tokens(), kv.k.dim(1) * rope.head_dim);
    rope_kv_write(q_out, rows.k, rows.v, rope, batch, kv);
  }

  void rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const RopeParams& rope, const AttentionBatch& batch,
                     KvLayer& kv) override {
    const int64_t T = batch.num_tokens(), D = rope.head_dim;
    const int64_t kv_heads = kv.k.dim(1);
    QS_CHECK(q.numel() % (T * D) == 0 && k.numel() == T * kv_heads * D && v.numel() == k.numel())
        << "q " << q.describe() << ", k " << k.describe() << ", v " << v.describe() << ", T " << T;
    QS_CHECK(kv.k.dim(2) == batch.page_size && kv.k.dim(3) == D);
    cpu::rope(q.data_as<float>(), T, q.numel() / (T * D), rope, batch.positions.data());
    cpu::rope(k.data_as<float>(), T, kv_heads, rope, batch.positions.data());
    cpu::kv_write(k.data_as<float>(), v.data_as<float>(), T, kv_heads, D, batch, kv.k.data_as<float>(), kv.v.data_as<float>());
  }

  void attention(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale, Tensor& out) override {
    const int64_t T = batch.num_tokens(), kv_heads = kv.k.dim(1), D = kv.k.dim(3);
    const int64_t heads = q.numel() / (T * D);
    QS_CHECK(heads * T * D == q.numel() && out.numel() == q.numel() && heads % kv_heads == 0);
    const auto fn = fast_ ? cpu::attention_fast : cpu::attention;
    fn(q.data_as<float>(), kv.k.data_as<float>(), kv.v.data_as<float>(), heads, kv_heads, D, batch, scale, out.data_as<float>());
  }

 private:
  // out[t] = silu(gate[t]) * up[t] over I values; gate and up rows `stride` apart.
  static void silu_mul_rows(const float* gate, const float* up, int64_t stride, int64_t T, int64_t I, Activations& out) {
    ThreadPool::global().parallel_for(T, [&](int64_t t0, int64_t t1) {
      std::vector<float> row(I);
      for (int64_t t = t0; t < t1; ++t) {
        const float* g = gate + t * stride;
        const float* u = up + t * stride;
        for (int64_t i = 0; i < I; ++i) row[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
        cpu::write_activation_row(row.data(), I, t, out);
      }
    });
  }

  bool fast_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(bool fast) { return std::make_unique<CpuBackend>(fast); }

}  // namespace qserve
