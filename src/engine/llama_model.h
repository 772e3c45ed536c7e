// The forward pass of the Llama family (Llama, Mistral, Qwen2) on any Backend,
// with a paged KV cache. One call runs a batch of sequences, each with any
// number of new tokens (a whole prompt, a prefill chunk or one decode token),
// and returns the logits of each sequence's last new token (or of every new
// token, for perplexity and teacher forcing).
//
//   auto ckpt = open_checkpoint(dir);
//   auto model = LlamaModel::load(*ckpt);                 // CPU FP32 backend
//   Batch batch;
//   batch.seqs.push_back({/*seq_id=*/0, prompt_ids, /*start=*/0});
//   Logits logits;
//   model->forward(batch, logits);                        // prefill
//   batch.seqs[0] = {0, {next_id}, int64_t(prompt_ids.size())};
//   model->forward(batch, logits);                        // one decode step
//   model->release(0);                                    // frees its KV pages
//
// Two ways to drive the KV cache:
//  - forward(Batch): sequences by id; the model keeps their page tables and
//    grows its page pool as needed (generate, tests, benchmarks).
//  - forward_paged(PagedBatch): the caller's block manager owns the page
//    tables (the serving engine); allocate_kv_cache() sizes the pool once.
// Use one or the other on a given model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "model/checkpoint.h"
#include "model/llama_weights.h"
#include "model/model_config.h"
#include "quant/quant_linear.h"

namespace qserve {

// One sequence's share of a forward call.
struct SequenceInput {
  int64_t seq_id = 0;
  std::vector<int32_t> tokens;  // the new tokens, at positions start .. start + n - 1
  int64_t start = 0;            // K/V of positions [0, start) are cached; start < cached length rewinds
};

struct Batch {
  std::vector<SequenceInput> seqs;  // distinct seq ids
  bool all_logits = false;          // also return the logits of every new token
};

// One sequence's share of a forward_paged call.
struct PagedSequenceInput {
  std::span<const int32_t> tokens;      // [n] new tokens at positions start .. start + n - 1
  int64_t start = 0;                    // K/V of [0, start) are in the pages already
  std::span<const int32_t> page_table;  // [>= ceil((start + n) / page_size)] physical pages, in position order
  bool want_logits = true;              // return the logits of its last new token
};

struct PagedBatch {
  std::vector<PagedSequenceInput> seqs;
  bool all_logits = false;
};

struct Logits {
  int64_t vocab_size = 0;
  std::vector<float> last;  // [sequences that want logits, V] f32, in batch order
  std::vector<float> all;   // [T, V] f32 for every new token in batch order (all_logits only)
  std::span<const float> row(int64_t i) const { return {last.data() + i * vocab_size, static_cast<size_t>(vocab_size)}; }
  std::span<const float> all_row(int64_t t) const { return {all.data() + t * vocab_size, static_cast<size_t>(vocab_size)}; }
};

struct LlamaModelOptions {
  int64_t page_size = 16;          // tokens per KV page (forward(Batch) mode)
  int64_t initial_kv_pages = 64;   // the pool doubles when it runs out (forward(Batch) mode)
  int64_t max_kv_pages = 1 << 20;  // beyond this, kResourceExhausted
  std::string device = "cpu";      // load(): the backend, engine/backend_factory.h ("cpu" | "cuda")
  // Decode steps of up to max_graph_batch sequences replayed from CUDA graphs
  // (backends with supports_graphs()), padded to 1, 2, 4, 8, then multiples of 16.
  bool cuda_graphs = true;
  int64_t max_graph_batch = 256;
  // One q|k|v and one gate|up linear per layer (backends with
  // supports_fused_projections(); layers whose parts differ in format stay
  // separate). false, or QSERVE_FUSE_PROJECTIONS=0 in the environment: seven
  // linears per layer (tests and measurements compare the two).
  bool fuse_projections = true;
  // The attention and the quantization of o_proj's input as one backend op
  // (Backend::attention_quantize: on CUDA the split merge quantizes, and
  // float activations skip a copy). false, or QSERVE_FUSE_ATTENTION_QUANT=0:
  // attention, then quantize (tests and measurements compare the two).
  bool fuse_attention_quantize = true;
};

class LlamaModel {
 public:
  // The checkpoint's weights on options.device (the CPU FP32 backend by default).
  static std::unique_ptr<LlamaModel> load(const Checkpoint& checkpoint, LlamaModelOptions options = {});
  // Any backend; weights are converted / copied by the backend, `weights` may go after.
  static std::unique_ptr<LlamaModel> create(const ModelConfig& config, const LlamaWeights& weights,
                                            std::unique_ptr<Backend> backend, LlamaModelOptions options = {});
  // The same with the block linears from `linears` (layer, module "q_proj" |
  // "k_proj" | "v_proj" | "o_proj" | "gate_proj" | "up_proj" | "down_proj"):
  // one quantized layer each in the canonical layout, which the backend
  // repacks (Backend::make_quantized_linear); the float block weights may
  // then be empty. How quantized checkpoints (engine/qoq_model.h) and dummy
  // weights bring their own layers. With fused projections, q / k / v and
  // gate / up are stacked (quant::concat_output_channels) before the backend
  // sees them.
  // `stacked` (optional): a source that makes the stacked layer of several
  // modules itself (layer, the modules in stacking order), the same layer as
  // the concatenation of their parts, without the copy; then it is asked
  // instead of `linears` for the fused projections, and must give parts of
  // one format, k and group.
  using QuantizedLinearSource = std::function<quant::QuantizedLinear(int64_t, const std::string&)>;
  using StackedLinearSource = std::function<quant::QuantizedLinear(int64_t, const std::vector<std::string>&)>;
  static std::unique_ptr<LlamaModel> create(const ModelConfig& config, const LlamaWeights& weights,
                                            std::unique_ptr<Backend> backend, LlamaModelOptions options,
                                            const QuantizedLinearSource& linears,
                                            const StackedLinearSource& stacked = nullptr);
  ~LlamaModel();

  const ModelConfig& config() const { return config_; }
  // The fused q|k|v and gate|up linears made (0 .. 2 per layer; LlamaModelOptions::fuse_projections).
  int64_t num_fused_projections() const;
  Backend& backend() { return *backend_; }

  // Sequences by id (see the header comment). Errors (kInvalidArgument /
  // kOutOfRange / kResourceExhausted) leave the cache as it was.
  void forward(const Batch& batch, Logits& out);
  void release(int64_t seq_id);                  // frees the pages of a sequence (no-op if unknown)
  int64_t cached_tokens(int64_t seq_id) const;   // 0 if unknown
  int64_t num_free_pages() const { return static_cast<int64_t>(free_pages_.size()); }
  int64_t num_pages() const { return num_pages_; }

  // Pages owned by the caller.
  void allocate_kv_cache(int64_t num_pages, int64_t page_size);
  int64_t kv_bytes_per_page(int64_t page_size) const;  // all layers, K and V
  void zero_kv_pages(std::span<const int32_t> pages);  // before reuse by another request
  void forward_paged(const PagedBatch& batch, Logits& out);
  // Sizes the activation workspace once, exactly, for steps of up to
  // `max_tokens` tokens and decode steps of up to `max_seqs` sequences
  // (padded to a captured graph's batch); a larger step later grows it by
  // doubling. The serving engine calls it with its limits, so its steps never
  // reallocate and the memory plan's workspace reserve
  // (engine/kv_memory_plan.h: workspace_rows) is what they use.
  void reserve_workspace(int64_t max_tokens, int64_t max_seqs);
  int64_t workspace_capacity() const;  // rows the activation workspace holds now
  // The same step, with each sequence that wants logits sampled on the
  // backend instead (params / steps per such sequence, in batch order;
  // backend/cpu/sampling.h semantics): tokens[i] for the i-th. Only the
  // tokens leave the device. Requires supports_sampling().
  bool supports_sampling() const;
  void forward_paged_sampled(const PagedBatch& batch, std::span<const SamplingParams> params,
                             std::span<const uint64_t> steps, std::vector<int32_t>& tokens);
  // Drops the captured decode-step graphs (the model's and the backend's):
  // the next steps capture them again, e.g. after the GEMM plans changed
  // (set_w4a8_plan_overrides) or the buffers they address moved.
  void drop_graphs();

 private:
  struct Layer;
  struct Workspace;
  struct StepBuffers;
  struct SequenceState {
    std::vector<int32_t> pages;
    int64_t length = 0;
  };

  LlamaModel(const ModelConfig& config, std::unique_ptr<Backend> backend, LlamaModelOptions options);
  void grow_pool(int64_t min_pages);
  void ensure_workspace(int64_t tokens, int64_t capacity);  // capacity >= tokens when it must grow
  void run(const PagedBatch& batch, Logits& out);
  // The forward pass up to the logits [R, V] on the backend (empty when no
  // row wants logits); last_rows: the rows of the sequences that want them.
  Tensor run_to_logits(const PagedBatch& batch, std::vector<int32_t>& last_rows);
  void run_layers(Tensor& x, const AttentionBatch& ab, StepBuffers& s);
  static int64_t graph_batch_size(int64_t seqs);

  // One captured decode-step graph per (padded batch, context bound): warmed
  // up by one uncaptured step, captured at the next one, valid while neither
  // the backend's buffers nor the model's workspace were reallocated.
  struct GraphState {
    bool warmed = false, captured = false;
    std::pair<uint64_t, uint64_t> epoch{0, 0};  // (backend memory_epoch, workspace_epoch_)
  };
  std::unordered_map<uint64_t, GraphState> graphs_;
  uint64_t workspace_epoch_ = 0;

  ModelConfig config_;
  std::unique_ptr<Backend> backend_;
  LlamaModelOptions options_;
  RopeParams rope_;
  bool fuse_attention_quantize_ = true;  // options_ and the environment (create)

  Tensor embed_;       // [V, H] float
  Tensor final_norm_;  // [H]
  std::unique_ptr<Linear> lm_head_;
  std::vector<std::unique_ptr<Layer>> layers_;

  // KV cache: per layer, [num_pages, Hkv, page_size, D] (KvLayer).
  std::vector<KvLayer> kv_;
  int64_t page_size_ = 0;
  int64_t num_pages_ = 0;
  std::vector<int32_t> free_pages_;  // forward(Batch) mode
  std::unordered_map<int64_t, SequenceState> sequences_;
  std::unique_ptr<Workspace> ws_;
};

}  // namespace qserve
