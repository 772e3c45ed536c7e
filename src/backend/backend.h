// The op interface every backend implements: the CPU FP32 reference
// (src/backend/cpu/, the oracle), the CUDA backend later. The forward pass
// (src/engine/llama_model.cpp) is written once against this interface.
//
// Shapes: T = new tokens of the step (all sequences, concatenated in batch
// order), H = hidden size, D = head_dim, Hq / Hkv = query / KV heads.
// Tensors handed to a backend live in that backend's memory (host for the CPU,
// device for CUDA); `alloc` makes them. "float" below means the backend's
// activation dtype (`float_dtype()`: F32 on the CPU reference, F16 on CUDA).
//
// How the quantized precisions fit (docs/qoq-spec.md sections 1-5):
//  - A Linear says which input it wants (`input_format()`): float, or per-token
//    INT8 (+ the per-token activation sum for per-channel W4 layers). The op
//    that produces a linear's input (rms_norm / add_rms_norm before q/k/v and
//    gate/up, silu_mul before down, quantize before o_proj) writes that format,
//    so normalization + quantization fuse into one kernel.
//  - KV pages are opaque to the forward pass: alloc_kv_layer makes them in the
//    backend's format (FP32 on the CPU reference; packed KV4 / KV8 / FP16 pages
//    on CUDA, docs/kv-cache-layout.md), rope_kv_write stores new K/V in it,
//    attention reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/sampling.h"  // SamplingParams (the kernel-level sampling semantics)
#include "core/tensor.h"

namespace qserve {

namespace quant {
struct QuantizedLinear;  // quant/quant_linear.h: one layer of a quantized checkpoint
}

// What a linear layer consumes.
enum class ActFormat {
  kFloat,            // values [T, K] float
  kInt8PerToken,     // values [T, K] I8, scales [T]: s_x = max|x| / 127 (spec section 2)
  kInt8PerTokenSum,  // as kInt8PerToken, plus sums [T]: a_sum = s_x * sum_i xq (per-channel W4)
  // as kInt8PerToken, plus sums [T] I32: sum_i xq, exact (g128 W4 on CUDA: the
  // kernels multiply the level-2 weights biased by 128 and subtract 128 x it)
  kInt8PerTokenCodeSum,
};

inline const char* act_format_name(ActFormat format) {
  switch (format) {
    case ActFormat::kFloat: return "float";
    case ActFormat::kInt8PerToken: return "int8 per-token";
    case ActFormat::kInt8PerTokenSum: return "int8 per-token + sum";
    case ActFormat::kInt8PerTokenCodeSum: return "int8 per-token + code sum";
  }
  return "?";
}

// A linear layer's input, written by the producer op in the format the layer asked for.
// Scales and sums are fp16 values by the contract (qoq-spec section 2); they
// are stored in the backend's float dtype: F32 holding fp16-exact values on
// the CPU reference, F16 on CUDA (what the GEMM epilogues read).
struct Activations {
  ActFormat format = ActFormat::kFloat;
  Tensor values;  // [T, K]: float for kFloat, I8 otherwise
  Tensor scales;  // [T] float_dtype(): per-token scale (int8 formats only)
  Tensor sums;    // [T] float_dtype(): per-token activation sum (kInt8PerTokenSum); I32 code sum (kInt8PerTokenCodeSum)

  int64_t tokens() const { return values.dim(0); }
  int64_t dim() const { return values.dim(1); }
};

// y = x W^T (+ bias). FP32 weights on the CPU reference; W4A8 / W8A8 / W4A16
// implementations hold their packed weights and scales behind the same call.
class Linear {
 public:
  virtual ~Linear() = default;
  virtual int64_t in_features() const = 0;
  virtual int64_t out_features() const = 0;
  virtual ActFormat input_format() const = 0;
  // x: [T, in] in input_format(); y: [T, out] float (preallocated by the caller).
  // y[t, o] = sum_i x[t, i] * W[o, i] + bias[o].
  virtual void forward(const Activations& x, Tensor& y) const = 0;
  // "fp32 [576 -> 1536] + bias" (logs and errors)
  virtual std::string describe() const = 0;
};

// RoPE on a head vector of D values. Rotate-half (Hugging Face Llama): pairs
// (j, j + D/2). Interleaved (original Llama / GGUF order): pairs (2j, 2j+1).
// x'_a = x_a cos(p f_j) - x_b sin(p f_j), x'_b = x_b cos(p f_j) + x_a sin(p f_j).
struct RopeParams {
  enum class Style { kRotateHalf, kInterleaved };
  Style style = Style::kRotateHalf;
  int64_t head_dim = 0;
  std::vector<float> inv_freq;  // [D/2] f_j, llama3 scaling already applied (model/rope.h)
};

// Where a step's tokens sit: one entry per sequence (its new tokens), plus the
// paged KV cache's page tables. Built on the host by the forward pass once per
// step; a device backend uploads it once (plan) and reuses it for every layer.
struct AttentionBatch {
  int64_t page_size = 0;                    // tokens per KV page
  std::vector<int32_t> token_offsets;       // [S + 1]: new tokens of sequence s are rows [off[s], off[s+1])
  std::vector<int32_t> positions;           // [T]: absolute position of each new token
  std::vector<int32_t> context_lens;        // [S]: tokens in the cache once this step's are written
  std::vector<int32_t> page_table_offsets;  // [S + 1]: pages of sequence s are page_table[off[s] .. off[s+1])
  std::vector<int32_t> page_table;          // page ids, in position order (position p is in page p / page_size)
  std::vector<int32_t> slots;               // [T]: page * page_size + p % page_size for each new token
  std::optional<int64_t> sliding_window;    // keys with position <= p - window are masked
  // > 0: a device backend lays the step out for contexts up to this length
  // (page-table width, decode split plan), so that a captured step can be
  // replayed while its sequences grow. Sequences with context 0 and slot -1
  // pad a batch to a captured size: nothing is written for them, their
  // attention output is zero.
  int32_t layout_max_context = 0;
  int64_t num_seqs() const { return static_cast<int64_t>(context_lens.size()); }
  int64_t num_tokens() const { return static_cast<int64_t>(positions.size()); }
};

// One layer's KV pages, made by Backend::alloc_kv_layer. Float layout (the
// CPU reference): k and v are [num_pages, Hkv, page_size, D] float (token slot
// s of page p, head h at ((p * Hkv + h) * page_size + s) * D). Packed layout
// (CUDA): k and v are [num_pages, page_bytes] U8 pools of KV4 / KV8 / FP16
// pages (docs/kv-cache-layout.md). Either way dim 0 is the page and a page is
// numel / num_pages contiguous elements, so the model can zero, copy and grow
// pools without knowing the format.
struct KvLayer {
  Tensor k;
  Tensor v;
  int64_t kv_heads = 0, page_size = 0, head_dim = 0;
};

// The memory a backend allocates from (device memory for CUDA); 0 = unknown.
struct BackendMemoryInfo {
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
};

// The device's share of the steps so far (a device backend under
// QSERVE_STEP_TIMING=1; empty elsewhere): busy_us[i], the device time of
// step i from its first upload to its last copy back; idle_us[j], the time
// the device sat idle between one step's end and the next one's start (the
// host's part of a step that the device did not overlap).
struct StepTiming {
  std::vector<float> busy_us, idle_us;
  bool series = false;  // QSERVE_STEP_TIMING=steps: report both in step order, not only their summary
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual DType float_dtype() const = 0;
  // Sizes the KV cache under --gpu-memory-utilization; the CPU reports unknown.
  virtual BackendMemoryInfo memory_info() const { return {}; }
  // Step timing (StepTiming above); zeros where not measured.
  virtual StepTiming step_timing() const { return {}; }

  // Zeroed memory of this backend.
  virtual Tensor alloc(DType dtype, std::vector<int64_t> shape) = 0;

  // The KV pages of one layer (zeroed) in the backend's cache format; the
  // default is the float layout of KvLayer.
  virtual KvLayer alloc_kv_layer(int64_t num_pages, int64_t page_size, int64_t kv_heads, int64_t head_dim) {
    KvLayer layer;
    layer.k = alloc(float_dtype(), {num_pages, kv_heads, page_size, head_dim});
    layer.v = alloc(float_dtype(), {num_pages, kv_heads, page_size, head_dim});
    layer.kv_heads = kv_heads;
    layer.page_size = page_size;
    layer.head_dim = head_dim;
    return layer;
  }
  // Zeroes the given pages of every layer's K and V pools (pages handed to a
  // new request hold another request's data).
  virtual void zero_kv_pages(std::span<KvLayer> layers, std::span<const int32_t> pages) {
    for (KvLayer& layer : layers)
      for (Tensor* t : {&layer.k, &layer.v}) {
        const int64_t num_pages = t->dim(0);
        if (num_pages == 0) continue;
        const int64_t per_page = t->numel() / num_pages;
        const size_t bytes = per_page * dtype_size(t->dtype());
        for (int32_t p : pages) {
          QS_CHECK(p >= 0 && p < num_pages) << "page " << p << " of " << num_pages;
          Tensor view(t->dtype(), {per_page}, static_cast<char*>(t->data()) + p * bytes, t->owner());
          zero(view);
        }
      }
  }
  // Bytes of one page of one layer, K and V together (sizes the cache).
  virtual int64_t kv_layer_page_bytes(int64_t page_size, int64_t kv_heads, int64_t head_dim) const {
    return 2 * kv_heads * page_size * head_dim * static_cast<int64_t>(dtype_size(float_dtype()));
  }
  // A host tensor (F32 / F16 / BF16 weights, or a GGUF block format) copied into this backend's
  // memory as float_dtype().
  virtual Tensor upload(const Tensor& host) = 0;
  // The token embedding table [V, H] for embedding(): as upload(), or kept in its stored type
  // where this backend's embedding() reads that type's rows (the CPU: F16, BF16 and GGUF blocks,
  // widened row by row, the same floats).
  virtual Tensor upload_table(const Tensor& host) { return upload(host); }
  // A host copy (F32) of a tensor of this backend (tests, logits).
  virtual Tensor download(const Tensor& t) = 0;
  // dst = src (same dtype, same number of elements).
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  // t = 0 (e.g. KV pages handed to a new sequence: they hold another request's data).
  virtual void zero(Tensor& t) = 0;

  // A float linear layer from host weights [out, in] (F32 / F16 / BF16 / GGUF blocks) and an
  // optional bias [out] (empty Tensor = none).
  virtual std::unique_ptr<Linear> make_linear(const Tensor& weight, const Tensor& bias) = 0;
  // A quantized linear layer (W4A8 per-channel / g128, W8A8, W4A16, or f16)
  // from one layer of a quantized checkpoint in its canonical layout; the
  // backend repacks it into its kernels' order (docs/quantized-checkpoint.md).
  virtual std::unique_ptr<Linear> make_quantized_linear(quant::QuantizedLinear&& layer) = 0;
  // Activations for `tokens` rows of `dim` values in `format` (allocated here).
  Activations alloc_activations(ActFormat format, int64_t tokens, int64_t dim) {
    Activations a;
    a.format = format;
    a.values = alloc(format == ActFormat::kFloat ? float_dtype() : DType::kI8, {tokens, dim});
    if (format != ActFormat::kFloat) a.scales = alloc(float_dtype(), {tokens});
    if (format == ActFormat::kInt8PerTokenSum) a.sums = alloc(float_dtype(), {tokens});
    if (format == ActFormat::kInt8PerTokenCodeSum) a.sums = alloc(DType::kI32, {tokens});
    return a;
  }

  // The metadata of the step about to run (called once per forward, before
  // its first op): a device backend uploads it once here and every layer's
  // rope_kv_write / attention of the step reads that copy. `batch` must stay
  // alive and unchanged until the step's last op.
  virtual void begin_step(const AttentionBatch& batch) { (void)batch; }

  // out[t] = table[ids[t]]; ids: host I32 [T] (validated by the caller), table [V, H] (from
  // upload_table), out [T, H].
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // out = rms_norm(x) * weight in out.format: x [T, H], weight [H].
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, Activations& out) = 0;
  // residual += delta, then out = rms_norm(residual) * weight (the residual add fused in).
  virtual void add_rms_norm(Tensor& residual, const Tensor& delta, const Tensor& weight, float eps, Activations& out) = 0;
  // out = silu(gate) * up in out.format: gate, up [T, I].
  virtual void silu_mul(const Tensor& gate, const Tensor& up, Activations& out) = 0;
  // out = x in out.format (the quantize node before o_proj; a copy for kFloat): x [T, K].
  virtual void quantize(const Tensor& x, Activations& out) = 0;
  // x += y: [T, H].
  virtual void add(Tensor& x, const Tensor& y) = 0;
  // out[r] = x[rows[r]]: rows host I32 [R], x [T, H], out [R, H] (last-token selection before lm_head).
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;

  // RoPE on q [T, Hq, D] and k [T, Hkv, D] in place at batch.positions, then
  // K and V [T, Hkv, D] of the new tokens written to their cache slots.
  virtual void rope_kv_write(Tensor& q, Tensor& k, const Tensor& v, const RopeParams& rope, const AttentionBatch& batch,
                             KvLayer& kv) = 0;
  // The fused projections: one q|k|v GEMM and one gate|up GEMM per layer
  // instead of five (fewer launches, a larger N at small batch). A backend
  // that returns true implements the two ops below; the model then builds
  // the q/k/v and gate/up linears stacked along their output channels
  // (LlamaModelOptions::fuse_projections).
  virtual bool supports_fused_projections() const { return false; }
  // rope_kv_write on one q|k|v GEMM output: qkv [T, (Hq + 2 Hkv) D], each row
  // q | k | v. The rotated q goes to q_out [T, Hq, D]; K and V go to the
  // cache; qkv itself is read only.
  virtual void rope_kv_write_fused(const Tensor& qkv, Tensor& q_out, const RopeParams& rope, const AttentionBatch& batch,
                                   KvLayer& kv) {
    (void)qkv, (void)q_out, (void)rope, (void)batch, (void)kv;
    QS_CHECK(false) << name() << " has no fused projections";
  }
  // silu_mul on one gate|up GEMM output: gate_up [T, 2I], each row gate | up; out [T, I].
  virtual void silu_mul_fused(const Tensor& gate_up, Activations& out) {
    (void)gate_up, (void)out;
    QS_CHECK(false) << name() << " has no fused projections";
  }

  // Causal attention of each new token over its sequence's cached keys at
  // positions <= its own (GQA: query head h reads KV head h / (Hq / Hkv)):
  // q [T, Hq, D] (after RoPE), out [T, Hq * D]; softmax(q.k * scale) v.
  virtual void attention(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale, Tensor& out) = 0;

  // attention, then its output in o_proj's input format: quantize(out, act)
  // (or a copy for float activations). `out` [T, Hq * D] is working space:
  // afterwards its contents are unspecified (a backend may write the result
  // straight into act). Backends fuse what they can (CUDA: the split merge
  // and the quantization in one kernel; float activations without the copy).
  virtual void attention_quantize(const Tensor& q, const KvLayer& kv, const AttentionBatch& batch, float scale,
                                  Tensor& out, Activations& act) {
    attention(q, kv, batch, scale, out);
    quantize(out, act);
  }

  // Step graphs (CUDA graphs): the device work between two calls captured
  // once under a key and replayed. Between capture_begin and capture_end the
  // ops must not allocate nor copy from the host (the caller warms a key up
  // with one uncaptured step first); memory_epoch() changes whenever a buffer
  // that a captured step may reference is reallocated: graphs of an older
  // epoch must not be launched.
  virtual bool supports_graphs() const { return false; }
  virtual void capture_begin() {}
  virtual void capture_end(uint64_t key) { (void)key; }
  virtual void graph_launch(uint64_t key) { (void)key; }
  virtual void drop_graphs() {}
  virtual uint64_t memory_epoch() const { return 0; }

  // Sampling on the backend, so that only token ids leave it (a device
  // backend; the CPU samples on the host from the logits instead).
  virtual bool supports_sampling() const { return false; }
  // tokens[r] = the token drawn from logits row r ([R, V] float) with params[r]
  // at the request's step steps[r], by the rules of backend/cpu/sampling.h.
  // Synchronizes once (the R tokens).
  virtual void sample(const Tensor& logits, std::span<const SamplingParams> params, std::span<const uint64_t> steps,
                      std::span<int32_t> tokens) {
    (void)logits, (void)params, (void)steps, (void)tokens;
    QS_CHECK(false) << name() << " does not sample";
  }
};

// The FP32 reference backend (threads from core/thread_pool.h). `fast` picks
// the SIMD matmul when the CPU has one (AVX-512 / AVX2+FMA); false keeps the
// scalar reference everywhere.
std::unique_ptr<Backend> make_cpu_backend(bool fast = true);

}  // namespace qserve
