#include "backend/cuda/cuda_backend_linear.h"

#include <fmt/format.h>

#include <cuda_fp16.h>

#include <vector>

#include "backend/cuda/cuda_backend_kernels.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_s8.h"
#include "backend/cuda/gemm_w4a16.h"
#include "backend/cuda/gemm_w4a8.h"
#include "backend/cuda/gemm_w8a8_epilogue.h"
#include "core/error.h"
#include "core/half.h"

namespace qserve::cuda {
namespace {

using quant::WeightFormat;

int64_t w8a8_m_bucket(int64_t m);

void check_io(const Linear& l, const Activations& x, const Tensor& y, ActFormat want) {
  QS_CHECK(x.format == want) << l.describe() << " fed " << act_format_name(x.format);
  QS_CHECK(x.dim() == l.in_features() && y.rank() == 2 && y.dim(0) == x.tokens() && y.dim(1) == l.out_features() &&
           y.dtype() == DType::kF16)
      << l.describe() << ": x " << x.values.describe() << ", y " << y.describe();
  if (want != ActFormat::kFloat)
    QS_CHECK(x.scales.dtype() == DType::kF16 && (want != ActFormat::kInt8PerTokenSum || x.sums.dtype() == DType::kF16) &&
             (want != ActFormat::kInt8PerTokenCodeSum || x.sums.dtype() == DType::kI32))
        << l.describe() << ": fp16 scales, fp16 sums / I32 code sums expected";
}

class F16Linear final : public Linear {
 public:
  F16Linear(std::shared_ptr<CudaBackendState> state, Tensor weight, Tensor bias, std::string origin)
      : state_(std::move(state)), weight_(std::move(weight)), bias_(std::move(bias)), origin_(std::move(origin)) {}
  int64_t in_features() const override { return weight_.dim(1); }
  int64_t out_features() const override { return weight_.dim(0); }
  ActFormat input_format() const override { return ActFormat::kFloat; }
  void forward(const Activations& x, Tensor& y) const override {
    check_io(*this, x, y, ActFormat::kFloat);
    const int64_t m = x.tokens(), n = out_features(), k = in_features();
    if (m == 0) return;
    // Row-major Y[m, n] = X[m, k] W[n, k]^T is column-major Y^T (n x m) = W^T^T X^T: op(A) = T on W (k x n).
    const float alpha = 1.0f, beta = 0.0f;
    cublasHandle_t h = state_->ctx.cublas();
    QS_CUDA_CHECK(cublasSetStream(h, state_->stream()));
    QS_CUDA_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                               static_cast<int>(k), &alpha, weight_.data(), CUDA_R_16F, static_cast<int>(k),
                               x.values.data(), CUDA_R_16F, static_cast<int>(k), &beta, y.data(), CUDA_R_16F,
                               static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (!bias_.empty())
      QS_CUDA_CHECK(add_bias_f16(y.data_as<uint16_t>(), bias_.data_as<uint16_t>(), m, n, state_->stream()));
  }
  std::string describe() const override {
    return fmt::format("{} [{} -> {}]{} (cuBLAS)", origin_, in_features(), out_features(), bias_.empty() ? "" : " + bias");
  }

 private:
  std::shared_ptr<CudaBackendState> state_;
  Tensor weight_;  // [n, k] fp16, device
  Tensor bias_;    // [n] fp16, device, or empty
  std::string origin_;
};

// Weight-only W4 (g128): 4-bit weights in device memory, fp16 activations
// (gemm_w4a16.h: a weight-streaming kernel for decode, dequantize + cuBLAS
// slices through the state's scratch for larger m).
class W4A16Linear final : public Linear {
 public:
  W4A16Linear(std::shared_ptr<CudaBackendState> state, W4A16DeviceWeights w) : state_(std::move(state)), w_(std::move(w)) {
    scratch_ = state_->w4a16_scratch(kW4A16ScratchBytes);
  }
  int64_t in_features() const override { return w_.k; }
  int64_t out_features() const override { return w_.n; }
  ActFormat input_format() const override { return ActFormat::kFloat; }
  void forward(const Activations& x, Tensor& y) const override {
    check_io(*this, x, y, ActFormat::kFloat);
    gemm_w4a16(w_, static_cast<const __half*>(x.values.data()), x.tokens(), y.data_as<__half>(), scratch_,
               kW4A16ScratchBytes, state_->ctx.cublas(), state_->stream());
  }
  std::string describe() const override {
    return fmt::format("w4a16 g{} [{} -> {}] (4-bit weights, fp16 tensor cores)", w_.group, in_features(), out_features());
  }

 private:
  std::shared_ptr<CudaBackendState> state_;
  W4A16DeviceWeights w_;
  void* scratch_ = nullptr;  // kW4A16ScratchBytes, owned by the state
};

class W4A8Linear final : public Linear {
 public:
  W4A8Linear(std::shared_ptr<CudaBackendState> state, W4A8DeviceWeights w) : state_(std::move(state)), w_(std::move(w)) {}
  int64_t in_features() const override { return w_.k; }
  int64_t out_features() const override { return w_.n; }
  ActFormat input_format() const override {
    return w_.kind == W4A8Kind::kPerChannel ? ActFormat::kInt8PerTokenSum : ActFormat::kInt8PerTokenCodeSum;
  }
  void forward(const Activations& x, Tensor& y) const override {
    check_io(*this, x, y, input_format());
    const int64_t m = x.tokens();
    if (m == 0) return;
    const W4A8Plan plan = plan_w4a8(state_->ctx.info(), w_, m);
    W4A8Args args;
    args.x = x.values.data_as<int8_t>();
    args.s_x = static_cast<const __half*>(x.scales.data());
    args.a_sum = w_.kind == W4A8Kind::kPerChannel ? static_cast<const __half*>(x.sums.data()) : nullptr;
    args.x_sum = w_.kind == W4A8Kind::kG128 ? x.sums.data_as<int32_t>() : nullptr;
    args.m = m;
    args.y = static_cast<__half*>(y.data());
    gemm_w4a8(w_, args, plan, state_->w4a8_workspace(plan.workspace_bytes), state_->stream());
  }
  std::string describe() const override {
    return fmt::format("w4a8 {} [{} -> {}] (CUDA)", w_.kind == W4A8Kind::kPerChannel ? "per-channel" : "g128", w_.k, w_.n);
  }

 private:
  std::shared_ptr<CudaBackendState> state_;
  W4A8DeviceWeights w_;
};

class W8A8Linear final : public Linear {
 public:
  W8A8Linear(std::shared_ptr<CudaBackendState> state, int64_t n, int64_t k, Tensor q, Tensor scale)
      : state_(std::move(state)), n_(n), k_(k), q_(std::move(q)), scale_(std::move(scale)) {}
  int64_t in_features() const override { return k_; }
  int64_t out_features() const override { return n_; }
  ActFormat input_format() const override { return ActFormat::kInt8PerToken; }
  void forward(const Activations& x, Tensor& y) const override {
    check_io(*this, x, y, ActFormat::kInt8PerToken);
    const int64_t m = x.tokens();
    if (m == 0) return;
    const DeviceInfo& dev = state_->ctx.info();
    if (use_s8_w8a8(dev, m, n_, k_)) {
      // The INT8-weight wgmma kernel with the epilogue fused (gemm_s8.h).
      const W4A8Plan plan = plan_s8(dev, m, n_, k_);
      W4A8Args args;
      args.x = x.values.data_as<int8_t>();
      args.s_x = static_cast<const __half*>(x.scales.data());
      args.m = m;
      args.y = static_cast<__half*>(y.data());
      gemm_s8_w8a8(q_.data_as<int8_t>(), scale_.data_as<float>(), n_, k_, args, plan,
                   state_->w4a8_workspace(plan.workspace_bytes), state_->stream());
      return;
    }
    // cuBLASLt's algorithm is searched (synchronously) at the first call of
    // each m; m is rounded up to a bucket so that serving, where m takes many
    // values, searches a few dozen shapes, not thousands. The rows past m are
    // computed from whatever the scratch holds and dropped by the epilogue.
    const int64_t mb = w8a8_m_bucket(m);
    const int8_t* xq = x.values.data_as<int8_t>();
    if (mb != m) {
      int8_t* padded = state_->w8a8_input(static_cast<size_t>(mb * k_));
      QS_CUDA_CHECK(cudaMemcpyAsync(padded, xq, static_cast<size_t>(m * k_), cudaMemcpyDeviceToDevice, state_->stream()));
      xq = padded;
    }
    int32_t* acc = state_->w8a8_accumulators(static_cast<size_t>(mb * n_));
    state_->lt.gemm_s8(xq, q_.data_as<int8_t>(), acc, mb, n_, k_, state_->stream());
    launch_w8a8_epilogue(acc, static_cast<const __half*>(x.scales.data()), scale_.data_as<float>(),
                         static_cast<__half*>(y.data()), m, n_, state_->stream());
  }
  std::string describe() const override {
    return fmt::format("w8a8 [{} -> {}] (cuBLASLt INT8{})", k_, n_,
                       s8_wgmma_supported(state_->ctx.info(), k_) ? "; INT8 wgmma at large m" : "");
  }

 private:
  std::shared_ptr<CudaBackendState> state_;
  int64_t n_, k_;
  Tensor q_;      // [n, k] int8, device
  Tensor scale_;  // [n] f32 (the fp16 scales widened), device
};

// Powers of two up to 256, then multiples of 128.
int64_t w8a8_m_bucket(int64_t m) {
  if (m <= 256) {
    int64_t b = 1;
    while (b < m) b *= 2;
    return b;
  }
  return (m + 127) / 128 * 128;
}

Tensor host_f16(std::vector<uint16_t> bits, std::vector<int64_t> shape) {
  auto holder = std::make_shared<std::vector<uint16_t>>(std::move(bits));
  return Tensor(DType::kF16, std::move(shape), holder->data(), std::shared_ptr<void>(holder, holder->data()));
}

}  // namespace

std::unique_ptr<Linear> make_f16_linear(const std::shared_ptr<CudaBackendState>& state, const Tensor& weight,
                                        const Tensor& bias) {
  QS_CHECK(weight.rank() == 2) << "linear weight " << weight.describe();
  Tensor w = device_f16_copy(state, weight);
  Tensor b;
  if (!bias.empty()) {
    QS_CHECK(bias.rank() == 1 && bias.dim(0) == weight.dim(0)) << "bias " << bias.describe() << " for " << weight.describe();
    b = device_f16_copy(state, bias);
  }
  return std::make_unique<F16Linear>(state, std::move(w), std::move(b), "fp16");
}

std::unique_ptr<Linear> make_quantized_linear(const std::shared_ptr<CudaBackendState>& state,
                                              quant::QuantizedLinear&& layer) {
  switch (layer.format) {
    case WeightFormat::kF16:  // already fp16 bits: uploaded as they are (no second host copy)
      return std::make_unique<F16Linear>(state, device_copy(state, host_f16(std::move(layer.f16), {layer.n, layer.k})),
                                         Tensor(), "fp16");
    case WeightFormat::kW4G128:
      return std::make_unique<W4A8Linear>(state, upload_w4a8(layer.g128));
    case WeightFormat::kW4PerChannel:
      return std::make_unique<W4A8Linear>(state, upload_w4a8(layer.w4pc));
    case WeightFormat::kW8PerChannel: {
      const quant::W8PerChannelWeights& w = layer.w8;
      Tensor q(DType::kI8, {w.n, w.k}, const_cast<int8_t*>(w.q.data()));
      std::vector<float> s(w.scale.size());
      for (size_t i = 0; i < s.size(); ++i) s[i] = half_to_float(w.scale[i]);
      Tensor st(DType::kF32, {w.n}, s.data());
      return std::make_unique<W8A8Linear>(state, w.n, w.k, device_copy(state, q), device_copy(state, st));
    }
    case WeightFormat::kW4A16: {
      const quant::W4A16Weights& w = layer.w4a16;
      if (w4a16_layout_supported(w.k, w.group)) return std::make_unique<W4A16Linear>(state, upload_w4a16(w));
      // Other shapes: dequantized once to fp16, then the float path.
      const std::vector<float> deq = quant::dequantize(w);
      std::vector<uint16_t> bits(deq.size());
      for (size_t i = 0; i < deq.size(); ++i) bits[i] = float_to_half(deq[i]);
      return std::make_unique<F16Linear>(state, device_copy(state, host_f16(std::move(bits), {layer.n, layer.k})),
                                         Tensor(), "w4a16 (dequantized to fp16: k or group not a multiple of 64)");
    }
  }
  fail(ErrorCode::kUnsupported, "CUDA backend: unknown weight format");
}

}  // namespace qserve::cuda
