// The CUDA Backend: fp16 activations, packed KV pages; every op is a kernel
// launch on the context's stream (no host synchronization inside a step: the
// only synchronous call of a forward pass is the logits download).
#include "backend/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "backend/cuda/attention/decode_attention.h"
#include "backend/cuda/attention/prefill_attention.h"
#include "backend/cuda/attention/rope_kv_write.h"
#include "backend/cuda/cuda_backend_kernels.h"
#include "backend/cuda/cuda_backend_linear.h"
#include "backend/cuda/cuda_backend_state.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/fused_ops.h"
#include "backend/cuda/kernels/sampling.h"
#include "backend/cuda/step_timer.h"
#include "core/error.h"
#include "core/half.h"

namespace qserve {
namespace {

using cuda::CudaBackendState;

void check_f16(const Tensor& t, const char* what) {
  QS_CHECK(t.dtype() == DType::kF16) << what << ": expected an F16 device tensor, got " << t.describe();
}

const uint16_t* h16(const Tensor& t) { return t.data_as<uint16_t>(); }
uint16_t* h16(Tensor& t) { return t.data_as<uint16_t>(); }

// The step's metadata on the device, one int32 array:
//   [positions T][slots T][q_starts S + 1][context_lens S][page_table S x stride]
struct StepMeta {
  const AttentionBatch* batch = nullptr;  // the host batch it was built from (identity check)
  int32_t tokens = 0, seqs = 0, stride = 0;
  int32_t max_context = 0, max_position = 0;
  int32_t plan_context = 0;  // the context the decode plan is made for (>= max_context)
  // The leading sequences with one new token each run the decode kernel, the
  // rest the prefill kernel. The scheduler serves running sequences oldest
  // first, so in a mixed step (prefill chunks and decode tokens) the decodes
  // come first; in a decode step the prefix is the whole batch.
  int32_t decode_prefix = 0;
  int32_t decode_prefix_context = 0;  // the longest context among them
  int32_t prefill_max_new = 0;        // the most new tokens among the others
  bool decode = false;                // decode_prefix == seqs: one new token per sequence
  Tensor device;        // I32
  const int32_t* positions = nullptr;
  const int32_t* slots = nullptr;
  const int32_t* q_starts = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* page_table = nullptr;
  // Decode split plan, made at the step's first attention call.
  bool planned = false;
  cuda::DecodePlan plan;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(KvDtype kv, int device) : state_(std::make_shared<CudaBackendState>(device)), kv_(kv) {
    if (cuda::StepTimer::enabled()) step_timer_ = std::make_unique<cuda::StepTimer>();
  }

  StepTiming step_timing() const override { return step_timer_ ? step_timer_->totals() : StepTiming{}; }

  std::string name() const override {
    return fmt::format("cuda ({}, fp16 activations, {} KV pages)", state_->ctx.info().name,
                       kv_ == KvDtype::kInt4 ? "KV4" : kv_ == KvDtype::kInt8 ? "KV8" : "FP16");
  }
  DType float_dtype() const override { return DType::kF16; }
  BackendMemoryInfo memory_info() const override {
    size_t free = 0, total = 0;
    QS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    // Blocks cached by the pool are free for this backend's allocations too.
    const size_t cached = state_->ctx.pool().bytes_cached();
    return {static_cast<int64_t>(total), static_cast<int64_t>(free + cached)};
  }

  Tensor alloc(DType dtype, std::vector<int64_t> shape) override {
    return cuda::device_tensor(state_, dtype, std::move(shape));
  }

  KvLayer alloc_kv_layer(int64_t num_pages, int64_t page_size, int64_t kv_heads, int64_t head_dim) override {
    const KvPageLayout layout = page_layout(page_size, kv_heads, head_dim);
    KvLayer layer;
    layer.k = alloc(DType::kU8, {num_pages, layout.page_bytes()});
    layer.v = alloc(DType::kU8, {num_pages, layout.page_bytes()});
    layer.kv_heads = kv_heads;
    layer.page_size = page_size;
    layer.head_dim = head_dim;
    return layer;
  }
  void zero_kv_pages(std::span<KvLayer> layers, std::span<const int32_t> pages) override {
    if (layers.empty() || pages.empty()) return;
    const int64_t page_bytes = layers[0].k.rank() == 2 ? layers[0].k.dim(1) : 0;
    // One launch: the pool pointers (K and V of every layer) and the page ids go up together.
    const size_t ptr_bytes = 2 * layers.size() * sizeof(uint8_t*), page_ids = pages.size() * sizeof(int32_t);
    uint8_t* h = static_cast<uint8_t*>(zero_meta_.host(ptr_bytes + page_ids));
    uint8_t** ptrs = reinterpret_cast<uint8_t**>(h);
    for (size_t l = 0; l < layers.size(); ++l) {
      QS_CHECK(layers[l].k.dtype() == DType::kU8 && layers[l].k.dim(1) == page_bytes) << layers[l].k.describe();
      for (int32_t p : pages) QS_CHECK(p >= 0 && p < layers[l].k.dim(0)) << "page " << p;
      ptrs[2 * l] = layers[l].k.data_as<uint8_t>();
      ptrs[2 * l + 1] = layers[l].v.data_as<uint8_t>();
    }
    std::memcpy(h + ptr_bytes, pages.data(), page_ids);
    if (zero_meta_dev_.nbytes() < ptr_bytes + page_ids)
      zero_meta_dev_ = alloc(DType::kU8, {static_cast<int64_t>(2 * (ptr_bytes + page_ids))});
    uint8_t* d = zero_meta_dev_.data_as<uint8_t>();
    zero_meta_.upload(d, ptr_bytes + page_ids, stream());
    QS_CUDA_CHECK(cuda::zero_pages(reinterpret_cast<uint8_t* const*>(d), static_cast<int>(2 * layers.size()),
                                   reinterpret_cast<const int32_t*>(d + ptr_bytes), static_cast<int>(pages.size()),
                                   page_bytes, stream()));
  }
  int64_t kv_layer_page_bytes(int64_t page_size, int64_t kv_heads, int64_t head_dim) const override {
    return 2 * page_layout(page_size, kv_heads, head_dim).page_bytes();
  }

  Tensor upload(const Tensor& host) override {
    switch (host.dtype()) {
      case DType::kF32:
      case DType::kF16:
      case DType::kBF16: return cuda::device_f16_copy(state_, host);
      default:
        if (dtype_is_blocked(host.dtype())) return cuda::device_f16_copy(state_, host);  // GGUF blocks: to fp16
        return cuda::device_copy(state_, host);  // integer tensors keep their dtype
    }
  }

  Tensor download(const Tensor& t) override {
    Tensor host = Tensor::zeros(DType::kF32, t.shape());
    const int64_t n = t.numel();
    if (n == 0) return host;
    std::vector<uint8_t> raw(t.nbytes());
    QS_CUDA_CHECK(cudaMemcpyAsync(raw.data(), t.data(), raw.size(), cudaMemcpyDeviceToHost, stream()));
    if (step_timer_) step_timer_->end(stream());  // (no-op without an open step)
    QS_CUDA_CHECK(cudaStreamSynchronize(stream()));
    if (step_timer_) step_timer_->collect();
    step_.batch = nullptr;  // a download ends a step
    float* out = host.data_as<float>();
    switch (t.dtype()) {
      case DType::kF16:
        for (int64_t i = 0; i < n; ++i) out[i] = half_to_float(reinterpret_cast<const uint16_t*>(raw.data())[i]);
        break;
      case DType::kF32: std::memcpy(out, raw.data(), raw.size()); break;
      case DType::kI8:
        for (int64_t i = 0; i < n; ++i) out[i] = reinterpret_cast<const int8_t*>(raw.data())[i];
        break;
      case DType::kU8:
        for (int64_t i = 0; i < n; ++i) out[i] = raw[i];
        break;
      case DType::kI32:
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(reinterpret_cast<const int32_t*>(raw.data())[i]);
        break;
      default: QS_CHECK(false) << "download of " << t.describe();
    }
    return host;
  }

  void copy(const Tensor& src, Tensor& dst) override {
    QS_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel()) << src.describe() << " -> " << dst.describe();
    if (src.nbytes() == 0) return;
    QS_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream()));
  }
  void zero(Tensor& t) override {
    if (t.nbytes() > 0) QS_CUDA_CHECK(cudaMemsetAsync(t.data(), 0, t.nbytes(), stream()));
  }

  std::unique_ptr<Linear> make_linear(const Tensor& weight, const Tensor& bias) override {
    return cuda::make_f16_linear(state_, weight, bias);
  }
  std::unique_ptr<Linear> make_quantized_linear(quant::QuantizedLinear&& layer) override {
    return cuda::make_quantized_linear(state_, std::move(layer));
  }

  void begin_step(const AttentionBatch& batch) override;

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    check_f16(table, "embedding table");
    check_f16(out, "embedding out");
    const int64_t T = ids.numel(), H = table.dim(1);
    QS_CHECK(ids.dtype() == DType::kI32 && out.dim(0) == T && out.dim(1) == H);
    if (T == 0) return;
    const int32_t* dev_ids = upload_i32(ids_, ids_dev_, ids);
    QS_CUDA_CHECK(cuda::embedding_gather(h16(table), table.dim(0), dev_ids, static_cast<int>(T), static_cast<int>(H),
                                         h16(out), stream()));
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Activations& out) override {
    norm(x, nullptr, weight, eps, out);
  }
  void add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps, Activations& out) override {
    // The kernels' convention: h = fp16(x + residual), residual = h, with x = delta.
    check_f16(residual, "add_rms_norm residual");
    QS_CHECK(residual.numel() == delta.numel()) << residual.describe() << " + " << delta.describe();
    norm(delta, &residual, weight, eps, out);
  }

  void silu_mul(const Tensor& gate, const Tensor& up, Activations& out) override {
    check_f16(gate, "silu_mul gate");
    check_f16(up, "silu_mul up");
    const int64_t T = gate.dim(0), I = gate.dim(1);
    QS_CHECK(up.dim(0) == T && up.dim(1) == I && out.tokens() == T && out.dim() == I);
    silu_mul_rows(h16(gate), h16(up), I, T, I, out);
  }

  bool supports_fused_projections() const override { return true; }

  void silu_mul_fused(const Tensor& gate_up, Activations& out) override {
    check_f16(gate_up, "silu_mul gate_up");
    const int64_t T = gate_up.dim(0), I = gate_up.dim(1) / 2;
    QS_CHECK(gate_up.dim(1) == 2 * I && out.tokens() == T && out.dim() == I) << gate_up.describe();
    silu_mul_rows(h16(gate_up), h16(gate_up) + I, 2 * I, T, I, out);
  }

  void quantize(const Tensor& x, Activations& out) override {
    check_f16(x, "quantize x");
    const int64_t T = x.dim(0), K = x.dim(1);
    QS_CHECK(out.tokens() == T && out.dim() == K);
    if (T == 0) return;
    if (out.format == ActFormat::kFloat) {
      copy(x, out.values);
      return;
    }
    QS_CUDA_CHECK(cuda::quantize_int8(h16(x), static_cast<int>(T), static_cast<int>(K), int8_rows(out), stream()));
  }

  void add(Tensor& x, const Tensor& y) override {
    check_f16(x, "add x");
    check_f16(y, "add y");
    QS_CHECK(x.numel() == y.numel()) << x.describe() << " + " << y.describe();
    QS_CUDA_CHECK(cuda::add_f16(h16(x), h16(y), x.numel(), stream()));
  }

  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    check_f16(x, "gather_rows x");
    const int64_t R = rows.numel(), H = x.dim(1);
    QS_CHECK(rows.dtype() == DType::kI32 && out.dim(0) == R && out.dim(1) == H);
    for (int64_t r = 0; r < R; ++r) {
      const int32_t src = rows.data_as<int32_t>()[r];
      QS_CHECK(src >= 0 && src < x.dim(0)) << "row " << src << " of " << x.describe();
    }
    if (R == 0) return;
    const int32_t* dev_rows = upload_i32(rows_, rows_dev_, rows);
    // A row gather is an embedding lookup in x.
    QS_CUDA_CHECK(cuda::embedding_gather(h16(x), x.dim(0), dev_rows, static_cast<int>(R), static_cast<int>(H), h16(out),
                                         stream()));
  }

  void rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const RopeParams& rope, const AttentionBatch& batch,
                     KvLayer& kv) override;
  void rope_kv_write_fused(const Tensor& qkv, Tensor& q_out, const RopeParams& rope, const AttentionBatch& batch,
                           KvLayer& kv) override;
  void attention(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale, Tensor& out) override {
    run_attention(q, kv, batch, scale, out, nullptr);
  }
  void attention_quantize(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale, Tensor& out,
                          Activations& act) override;

  bool supports_graphs() const override { return true; }
  void capture_begin() override {
    QS_CHECK(!state_->capturing);
    QS_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    state_->capturing = true;
  }
  void capture_end(uint64_t key) override {
    QS_CHECK(state_->capturing);
    state_->capturing = false;
    cudaGraph_t graph = nullptr;
    QS_CUDA_CHECK(cudaStreamEndCapture(stream(), &graph));
    cudaGraphExec_t exec = nullptr;
    QS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    QS_CUDA_CHECK(cudaGraphDestroy(graph));
    auto it = graphs_.find(key);
    if (it != graphs_.end()) QS_CUDA_CHECK(cudaGraphExecDestroy(it->second));
    graphs_[key] = exec;
  }
  void graph_launch(uint64_t key) override {
    auto it = graphs_.find(key);
    QS_CHECK(it != graphs_.end()) << "no step graph " << key;
    QS_CUDA_CHECK(cudaGraphLaunch(it->second, stream()));
  }
  void drop_graphs() override {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
  }
  uint64_t memory_epoch() const override { return epoch_ + state_->epoch; }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream());
    drop_graphs();
  }

  bool supports_sampling() const override { return true; }
  void sample(const Tensor& logits, std::span<const SamplingParams> params, std::span<const uint64_t> steps,
              std::span<int32_t> tokens) override;

 private:
  cudaStream_t stream() const { return state_->stream(); }

  KvPageLayout page_layout(int64_t page_size, int64_t kv_heads, int64_t head_dim) const {
    if (head_dim != 64 && head_dim != 128)
      fail(ErrorCode::kUnsupported, "CUDA backend: head_dim {} (the attention kernels take 64 or 128)", head_dim);
    KvPageLayout l;
    l.page_size = static_cast<int32_t>(page_size);
    l.num_kv_heads = static_cast<int32_t>(kv_heads);
    l.head_dim = static_cast<int32_t>(head_dim);
    l.dtype = kv_;
    return l;
  }
  PagedKvCache cache_of(const KvLayer& kv) const {
    QS_CHECK(kv.k.dtype() == DType::kU8 && kv.k.rank() == 2 && kv.v.numel() == kv.k.numel())
        << "KV pages of another backend: " << kv.k.describe();
    PagedKvCache c;
    c.layout = page_layout(kv.page_size, kv.kv_heads, kv.head_dim);
    QS_CHECK(kv.k.dim(1) == c.layout.page_bytes()) << "KV page of " << kv.k.dim(1) << " bytes, layout says "
                                                    << c.layout.page_bytes();
    c.k_pages = const_cast<uint8_t*>(kv.k.data_as<uint8_t>());
    c.v_pages = const_cast<uint8_t*>(kv.v.data_as<uint8_t>());
    c.num_pages = static_cast<int32_t>(kv.k.dim(0));
    return c;
  }

  // out = silu(gate) * up over [T, I]; gate and up rows `stride` elements apart.
  void silu_mul_rows(const uint16_t* gate, const uint16_t* up, int64_t stride, int64_t T, int64_t I, Activations& out) {
    if (T == 0) return;
    if (out.format == ActFormat::kFloat) {
      check_f16(out.values, "silu_mul out");
      QS_CUDA_CHECK(cuda::silu_mul_f16(gate, up, stride, T, I, h16(out.values), stream()));
      return;
    }
    QS_CUDA_CHECK(cuda::silu_mul_quant(gate, up, stride, static_cast<int>(T), static_cast<int>(I), int8_rows(out), stream()));
  }

  Int8Rows int8_rows(Activations& out) {
    QS_CHECK(out.values.dtype() == DType::kI8 && out.scales.dtype() == DType::kF16)
        << "int8 activations with fp16 scales expected, got " << out.values.describe() << " / " << out.scales.describe();
    Int8Rows r;
    r.q = out.values.data_as<int8_t>();
    r.scale = h16(out.scales);
    r.sum = out.format == ActFormat::kInt8PerTokenSum ? h16(out.sums) : nullptr;
    r.code_sum = out.format == ActFormat::kInt8PerTokenCodeSum ? out.sums.data_as<int32_t>() : nullptr;
    return r;
  }

  void norm(const Tensor& x, Tensor* residual, const Tensor& weight, float eps, Activations& out) {
    check_f16(x, "rms_norm x");
    check_f16(weight, "rms_norm weight");
    const int64_t T = x.dim(0), H = x.dim(1);
    QS_CHECK(weight.numel() == H && out.tokens() == T && out.dim() == H);
    if (T == 0) return;
    uint16_t* res = residual ? h16(*residual) : nullptr;
    if (out.format == ActFormat::kFloat) {
      check_f16(out.values, "rms_norm out");
      QS_CUDA_CHECK(cuda::rmsnorm(h16(x), res, h16(weight), static_cast<int>(T), static_cast<int>(H), eps,
                                  h16(out.values), stream()));
    } else {
      QS_CUDA_CHECK(cuda::rmsnorm_quant(h16(x), res, h16(weight), static_cast<int>(T), static_cast<int>(H), eps,
                                        int8_rows(out), stream()));
    }
  }

  const int32_t* upload_i32(cuda::PinnedStaging& staging, Tensor& device, const Tensor& host) {
    QS_CHECK(!state_->capturing) << "host upload while capturing a step graph";
    const size_t bytes = host.nbytes();
    if (device.empty() || device.nbytes() < bytes)
      device = alloc(DType::kI32, {std::max<int64_t>(host.numel(), 2 * (device.empty() ? 0 : device.numel()))});
    std::memcpy(staging.host(bytes), host.data(), bytes);
    staging.upload(device.data(), bytes, stream());
    return device.data_as<int32_t>();
  }

  const StepMeta& step_for(const AttentionBatch& batch) const {
    QS_CHECK(step_.batch == &batch) << "CUDA backend: begin_step(batch) must precede the step's attention ops";
    return step_;
  }

  void ensure_rope_table(const RopeParams& rope, int32_t max_position);
  // The attention of a step; with `quant`, a decode step also quantizes its
  // output rows into it (returns true then; false: the caller quantizes).
  bool run_attention(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale, Tensor& out,
                     const Int8Rows* quant);
  // RoPE + paged KV write of the step's tokens from `in` (q_dim = Hq * D), the rotated q to q_out.
  void rope_kv_launch(const QkvInput& in, int64_t q_dim, uint16_t* q_out, const RopeParams& rope, const StepMeta& m,
                      const AttentionBatch& batch, KvLayer& kv);

  std::shared_ptr<CudaBackendState> state_;
  KvDtype kv_;
  StepMeta step_;
  std::unique_ptr<cuda::StepTimer> step_timer_;  // QSERVE_STEP_TIMING=1 only
  cuda::PinnedStaging meta_, ids_, rows_;
  Tensor ids_dev_, rows_dev_;
  Tensor decode_workspace_;  // flash-decoding partials
  cuda::PinnedStaging sampling_meta_, zero_meta_;
  Tensor zero_meta_dev_;  // U8: K / V pool pointers of every layer, then page ids
  Tensor sampling_logits_;  // [R, V] f32: the sampler's input
  Tensor sampling_meta_dev_;  // U8: [R] SamplingParams, then [R] u64 steps, then [R] i32 tokens
  // RoPE table [positions, D / 2, 2] f32 of rope_inv_freq_ (cos, sin of position * inv_freq in f32, as the CPU).
  Tensor rope_table_;
  std::vector<float> rope_inv_freq_;
  int32_t rope_positions_ = 0;
  uint64_t epoch_ = 0;  // reallocations of the buffers above (see memory_epoch)
  std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;
};

void CudaBackend::begin_step(const AttentionBatch& batch) {
  const int64_t T = batch.num_tokens(), S = batch.num_seqs();
  QS_CHECK(static_cast<int64_t>(batch.token_offsets.size()) == S + 1 &&
           static_cast<int64_t>(batch.page_table_offsets.size()) == S + 1 &&
           static_cast<int64_t>(batch.slots.size()) == T && batch.page_size > 0)
      << "malformed attention batch";
  if (step_timer_) step_timer_->begin(stream());  // before the step's first upload
  StepMeta m;
  m.batch = &batch;
  m.tokens = static_cast<int32_t>(T);
  m.seqs = static_cast<int32_t>(S);
  for (int64_t s = 0; s < S; ++s) {
    const int32_t n = batch.token_offsets[s + 1] - batch.token_offsets[s];
    if (n == 1 && m.decode_prefix == s) {
      ++m.decode_prefix;
      m.decode_prefix_context = std::max(m.decode_prefix_context, batch.context_lens[s]);
    } else {
      m.prefill_max_new = std::max(m.prefill_max_new, n);
    }
    m.max_context = std::max(m.max_context, batch.context_lens[s]);
    m.stride = std::max(m.stride, batch.page_table_offsets[s + 1] - batch.page_table_offsets[s]);
  }
  m.decode = m.decode_prefix == S;
  for (int32_t p : batch.positions) m.max_position = std::max(m.max_position, p);
  if (batch.sliding_window && m.max_context > *batch.sliding_window)
    fail(ErrorCode::kUnsupported, "CUDA backend: sliding-window attention (window {}) over a context of {}",
         *batch.sliding_window, m.max_context);
  m.plan_context = std::max(m.max_context, batch.layout_max_context);
  m.stride = std::max<int32_t>({m.stride, 1, static_cast<int32_t>((batch.layout_max_context + batch.page_size - 1) / batch.page_size)});

  const int64_t count = 2 * T + (S + 1) + S + S * m.stride;
  int32_t* h = static_cast<int32_t*>(meta_.host(count * sizeof(int32_t)));
  int64_t o = 0;
  std::memcpy(h + o, batch.positions.data(), T * sizeof(int32_t));
  o += T;
  std::memcpy(h + o, batch.slots.data(), T * sizeof(int32_t));
  o += T;
  std::memcpy(h + o, batch.token_offsets.data(), (S + 1) * sizeof(int32_t));
  o += S + 1;
  std::memcpy(h + o, batch.context_lens.data(), S * sizeof(int32_t));
  o += S;
  for (int64_t s = 0; s < S; ++s) {  // the CSR page tables padded to [S, stride] (pad: page 0, never read)
    const int32_t b = batch.page_table_offsets[s], e = batch.page_table_offsets[s + 1];
    std::copy(batch.page_table.begin() + b, batch.page_table.begin() + e, h + o + s * m.stride);
    std::fill(h + o + s * m.stride + (e - b), h + o + (s + 1) * m.stride, 0);
  }
  if (step_.device.empty() || step_.device.numel() < count) {
    m.device = alloc(DType::kI32, {std::max<int64_t>(count, 2 * (step_.device.empty() ? 0 : step_.device.numel()))});
    ++epoch_;
  } else {
    m.device = step_.device;
  }
  meta_.upload(m.device.data(), count * sizeof(int32_t), stream());
  const int32_t* d = m.device.data_as<int32_t>();
  m.positions = d;
  m.slots = d + T;
  m.q_starts = d + 2 * T;
  m.context_lens = d + 2 * T + S + 1;
  m.page_table = d + 2 * T + 2 * S + 1;
  step_ = std::move(m);
}

void CudaBackend::ensure_rope_table(const RopeParams& rope, int32_t max_position) {
  const int64_t half = rope.head_dim / 2;
  QS_CHECK(static_cast<int64_t>(rope.inv_freq.size()) == half) << "rope inv_freq of " << rope.inv_freq.size();
  if (rope.inv_freq == rope_inv_freq_) {
    // Twice the positions in use, so that a step graph captured after an
    // uncaptured step never needs a larger table.
    if (state_->capturing) QS_CHECK(max_position < rope_positions_) << "RoPE table growth while capturing";
    if (state_->capturing || 2 * static_cast<int64_t>(max_position) < rope_positions_) return;
  }
  int32_t positions = std::max<int32_t>(rope_positions_, 4096);
  while (positions <= 2 * static_cast<int64_t>(max_position)) positions *= 2;
  ++epoch_;
  std::vector<float> table(static_cast<size_t>(positions) * half * 2);
  for (int32_t p = 0; p < positions; ++p)
    for (int64_t j = 0; j < half; ++j) {
      const float angle = rope.inv_freq[j] * static_cast<float>(p);  // f32, as the CPU reference
      table[(static_cast<size_t>(p) * half + j) * 2] = std::cos(angle);
      table[(static_cast<size_t>(p) * half + j) * 2 + 1] = std::sin(angle);
    }
  rope_table_ = cuda::device_copy(state_, Tensor(DType::kF32, {positions, half, 2}, table.data()));
  rope_inv_freq_ = rope.inv_freq;
  rope_positions_ = positions;
}

void CudaBackend::rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const RopeParams& rope,
                                const AttentionBatch& batch, KvLayer& kv) {
  const StepMeta& m = step_for(batch);
  const int64_t T = m.tokens, D = rope.head_dim;
  if (T == 0) return;
  check_f16(q, "rope q");
  check_f16(k, "rope k");
  check_f16(v, "rope v");
  QS_CHECK(q.numel() % (T * D) == 0 && k.numel() == T * kv.kv_heads * D && v.numel() == k.numel())
      << "q " << q.describe() << ", k " << k.describe() << ", v " << v.describe() << ", T " << T;
  const int64_t q_dim = q.numel() / T, kv_dim = kv.kv_heads * D;
  QkvInput in;
  in.q = h16(q);
  in.k = h16(k);
  in.v = h16(v);
  in.q_stride = q_dim;
  in.k_stride = in.v_stride = kv_dim;
  rope_kv_launch(in, q_dim, h16(q), rope, m, batch, kv);  // q rotated in place
}

void CudaBackend::rope_kv_write_fused(const Tensor& qkv, Tensor& q_out, const RopeParams& rope,
                                      const AttentionBatch& batch, KvLayer& kv) {
  const StepMeta& m = step_for(batch);
  const int64_t T = m.tokens, D = rope.head_dim;
  if (T == 0) return;
  check_f16(qkv, "rope qkv");
  check_f16(q_out, "rope q_out");
  const int64_t kv_dim = kv.kv_heads * D, q_dim = q_out.numel() / T, width = q_dim + 2 * kv_dim;
  QS_CHECK(q_out.numel() == T * q_dim && q_dim % D == 0 && qkv.dim(0) == T && qkv.dim(1) == width)
      << "qkv " << qkv.describe() << ", q_out " << q_out.describe() << ", T " << T;
  QkvInput in;  // three column ranges of each qkv row
  in.q = h16(qkv);
  in.k = in.q + q_dim;
  in.v = in.k + kv_dim;
  in.q_stride = in.k_stride = in.v_stride = width;
  rope_kv_launch(in, q_dim, h16(q_out), rope, m, batch, kv);
}

void CudaBackend::rope_kv_launch(const QkvInput& in, int64_t q_dim, uint16_t* q_out, const RopeParams& rope,
                                 const StepMeta& m, const AttentionBatch& batch, KvLayer& kv) {
  const int64_t D = rope.head_dim;
  const PagedKvCache cache = cache_of(kv);
  QS_CHECK(kv.head_dim == D && kv.page_size == batch.page_size) << "KV layer of head_dim " << kv.head_dim << ", page "
                                                                 << kv.page_size;
  ensure_rope_table(rope, m.max_position);
  AttentionShape shape;
  shape.num_q_heads = static_cast<int32_t>(q_dim / D);
  shape.num_kv_heads = static_cast<int32_t>(kv.kv_heads);
  shape.head_dim = static_cast<int32_t>(D);
  KvWriteBatch wb;
  wb.num_tokens = m.tokens;
  wb.positions = m.positions;
  wb.slot_mapping = m.slots;
  const RopeStyle style = rope.style == RopeParams::Style::kRotateHalf ? RopeStyle::kRotateHalf : RopeStyle::kInterleaved;
  QS_CUDA_CHECK(cuda::rope_kv_write(in, wb, shape, style, rope_table_.data_as<float>(), q_out, cache, stream()));
}

void CudaBackend::attention_quantize(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale,
                                     Tensor& out, Activations& act) {
  if (act.format == ActFormat::kFloat) {  // fp16 rows for o_proj: the attention writes them there, no copy
    run_attention(q, kv, batch, scale, act.values, nullptr);
    return;
  }
  QS_CHECK(out.dim(0) == act.tokens() && out.dim(1) == act.dim()) << out.describe() << " -> " << act.values.describe();
  const Int8Rows rows = int8_rows(act);
  // a decode step quantizes in the attention's last kernel; other steps after it
  if (!run_attention(q, kv, batch, scale, out, &rows)) quantize(out, act);
}

bool CudaBackend::run_attention(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale,
                                Tensor& out, const Int8Rows* quant) {
  const StepMeta& m0 = step_for(batch);
  const int64_t T = m0.tokens, D = kv.head_dim;
  if (T == 0) return false;
  check_f16(q, "attention q");
  check_f16(out, "attention out");
  const PagedKvCache cache = cache_of(kv);
  QS_CHECK(q.numel() % (T * D) == 0 && out.numel() == q.numel()) << "q " << q.describe() << ", out " << out.describe();
  AttentionShape shape;
  shape.num_q_heads = static_cast<int32_t>(q.numel() / (T * D));
  shape.num_kv_heads = static_cast<int32_t>(kv.kv_heads);
  shape.head_dim = static_cast<int32_t>(D);
  // Decode kernel over sequences [0, decode_seqs) (rows [0, decode_seqs): one each).
  const int32_t decode_seqs = m0.decode_prefix;
  if (decode_seqs > 0) {
    if (!step_.planned) {
      const int32_t context = m0.decode ? m0.plan_context : m0.decode_prefix_context;
      step_.plan = cuda::plan_decode_attention(shape, kv_, decode_seqs, context, state_->ctx.info().sm_count);
      // QSERVE_DECODE_UNIT_WARPS=4 (2, 1) overrides the plan's warps per unit
      // (A/B measurements of the engine: 4 keeps one unit per block)
      static const int forced_unit_warps = [] {
        const char* e = std::getenv("QSERVE_DECODE_UNIT_WARPS");
        const int w = e != nullptr ? std::atoi(e) : 0;
        return w == 4 || w == 2 || w == 1 ? w : 0;
      }();
      if (forced_unit_warps > 0) step_.plan.unit_warps = forced_unit_warps;
      if (step_.plan.workspace_bytes > 0 && decode_workspace_.nbytes() < step_.plan.workspace_bytes) {
        decode_workspace_ = alloc(DType::kU8, {static_cast<int64_t>(2 * step_.plan.workspace_bytes)});
        ++epoch_;
      }
      step_.planned = true;
    }
    cuda::DecodeArgs a;
    a.q = h16(q);
    a.out = h16(out);
    a.context_lens = m0.context_lens;
    a.page_table = m0.page_table;
    a.page_table_stride = m0.stride;
    a.batch = decode_seqs;
    a.softmax_scale = scale;
    if (m0.decode && quant != nullptr) a.quant = *quant;  // every row is a decode row
    QS_CUDA_CHECK(cuda::decode_attention(a, shape, cache, step_.plan, decode_workspace_.data(), stream()));
    if (m0.decode) return a.quant.q != nullptr;
  }
  // Prefill kernel over the other sequences; q_starts hold absolute rows of q.
  cuda::PrefillArgs a;
  a.q = h16(q);
  a.out = h16(out);
  a.q_starts = m0.q_starts + decode_seqs;
  a.context_lens = m0.context_lens + decode_seqs;
  a.page_table = m0.page_table + static_cast<int64_t>(decode_seqs) * m0.stride;
  a.page_table_stride = m0.stride;
  a.batch = m0.seqs - decode_seqs;
  a.max_new_tokens = m0.prefill_max_new;
  a.softmax_scale = scale;
  QS_CUDA_CHECK(cuda::prefill_attention(a, shape, cache, stream()));
  return false;
}

void CudaBackend::sample(const Tensor& logits, std::span<const SamplingParams> params, std::span<const uint64_t> steps,
                         std::span<int32_t> tokens) {
  check_f16(logits, "sample logits");
  const int64_t R = logits.dim(0), V = logits.dim(1);
  QS_CHECK(static_cast<int64_t>(params.size()) == R && static_cast<int64_t>(steps.size()) == R &&
           static_cast<int64_t>(tokens.size()) == R)
      << R << " rows, " << params.size() << " params, " << steps.size() << " steps, " << tokens.size() << " tokens";
  if (R == 0) return;
  if (sampling_logits_.numel() < R * V) sampling_logits_ = alloc(DType::kF32, {R * V});
  QS_CUDA_CHECK(cuda::f16_to_f32(h16(logits), sampling_logits_.data_as<float>(), R * V, stream()));
  static_assert(sizeof(SamplingParams) % 8 == 0);
  const size_t p_bytes = R * sizeof(SamplingParams), s_bytes = R * sizeof(uint64_t), t_bytes = R * sizeof(int32_t);
  if (sampling_meta_dev_.nbytes() < p_bytes + s_bytes + t_bytes)
    sampling_meta_dev_ = alloc(DType::kU8, {static_cast<int64_t>(2 * (p_bytes + s_bytes + t_bytes))});
  uint8_t* h = static_cast<uint8_t*>(sampling_meta_.host(p_bytes + s_bytes));
  std::memcpy(h, params.data(), p_bytes);
  std::memcpy(h + p_bytes, steps.data(), s_bytes);
  uint8_t* d = sampling_meta_dev_.data_as<uint8_t>();
  sampling_meta_.upload(d, p_bytes + s_bytes, stream());
  cuda::SamplingBatch sb;
  sb.logits = sampling_logits_.data_as<float>();
  sb.params = reinterpret_cast<const SamplingParams*>(d);
  sb.steps = reinterpret_cast<const uint64_t*>(d + p_bytes);
  sb.tokens = reinterpret_cast<int32_t*>(d + p_bytes + s_bytes);
  sb.batch = static_cast<int32_t>(R);
  sb.vocab = static_cast<int32_t>(V);
  QS_CUDA_CHECK(cuda::sample_tokens(sb, stream()));
  QS_CUDA_CHECK(cudaMemcpyAsync(tokens.data(), sb.tokens, t_bytes, cudaMemcpyDeviceToHost, stream()));
  if (step_timer_) step_timer_->end(stream());
  QS_CUDA_CHECK(cudaStreamSynchronize(stream()));  // the step's one synchronization
  if (step_timer_) step_timer_->collect();
  step_.batch = nullptr;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(KvDtype kv, int device) {
  if (cuda::device_count() <= device)
    fail(ErrorCode::kUnsupported, "device 'cuda': no CUDA device {} visible ({} found)", device, cuda::device_count());
  return std::make_unique<CudaBackend>(kv, device);
}

}  // namespace qserve
