#include "engine/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "core/error.h"
#include "engine/backend_factory.h"
#include "engine/kv_memory_plan.h"
#include "engine/qoq_model.h"
#include "model/rope.h"
#include "quant/qoq_checkpoint.h"

namespace qserve {

struct LlamaModel::Layer {
  Tensor input_norm;  // [H] float
  Tensor post_norm;   // [H] float
  // Fused projections: qkv [H -> q_dim + 2 kv_dim] (q | k | v) and gate_up
  // [H -> 2 I] (gate | up); null where the layer keeps them separate (q, k, v
  // / gate, up set instead).
  std::unique_ptr<Linear> qkv, gate_up;
  std::unique_ptr<Linear> q, k, v, o, gate, up, down;
};

// Activation buffers of one step, sized for `capacity` tokens and reused while
// steps fit (so a device backend does not allocate per step). Buffers of a
// layout no layer uses stay empty.
struct LlamaModel::Workspace {
  int64_t capacity = 0;
  Tensor x;        // [T, H] the residual stream
  Activations attn_in, o_in, mlp_in, down_in, head_in;
  Tensor q;        // [T, Hq * D] (after RoPE)
  Tensor k, v;     // [T, Hkv * D] separate projections
  Tensor qkv;      // [T, Hq * D + 2 Hkv * D] fused projection, rows q | k | v
  Tensor attn;     // [T, Hq * D]
  Tensor o_out;    // [T, H]
  Tensor gate, up; // [T, I] separate projections
  Tensor gate_up;  // [T, 2I] fused projection, rows gate | up
  Tensor mlp_out;  // [T, H]
  Tensor last_x;   // [T, H] rows of the sequences' last tokens
  Tensor logits;   // [T, V]
};

// The workspace's first T rows, what one step's layers use.
struct LlamaModel::StepBuffers {
  Activations attn_in, o_in, mlp_in, down_in;
  Tensor q, k, v, qkv, attn, o_out, gate, up, gate_up, mlp_out;
};

namespace {

// The first `rows` rows of a [capacity, ...] buffer (empty for an empty one).
Tensor rows_of(const Tensor& t, int64_t rows) {
  if (t.empty()) return {};
  std::vector<int64_t> shape = t.shape();
  shape[0] = rows;
  return Tensor(t.dtype(), std::move(shape), const_cast<void*>(t.data()), t.owner());
}

Activations rows_of(const Activations& a, int64_t rows) {
  Activations out;
  out.format = a.format;
  out.values = rows_of(a.values, rows);
  if (!a.scales.empty()) out.scales = rows_of(a.scales, rows);
  if (!a.sums.empty()) out.sums = rows_of(a.sums, rows);
  return out;
}

// Host tensors of one dtype stacked along dim 0 (weights [n_i, k] -> [sum n_i, k], biases [n_i] -> [sum n_i]).
Tensor stack_rows(const std::vector<const Tensor*>& parts) {
  const Tensor& first = *parts.front();
  std::vector<int64_t> shape = first.shape();
  shape[0] = 0;
  for (const Tensor* p : parts) {
    QS_CHECK(p->dtype() == first.dtype() && p->rank() == first.rank() && (p->rank() == 1 || p->dim(1) == first.dim(1)))
        << p->describe() << " stacked on " << first.describe();
    shape[0] += p->dim(0);
  }
  Tensor out = Tensor::zeros(first.dtype(), shape);
  char* dst = static_cast<char*>(out.data());
  for (const Tensor* p : parts) {
    const size_t bytes = p->nbytes();
    std::memcpy(dst, p->data(), bytes);
    dst += bytes;
  }
  return out;
}

// One block linear: its module name, its float weight [n, k] and bias [n]
// (host; unused with a quantized source), where it goes when made alone.
struct LinearPart {
  const char* module;
  const Tensor* weight;
  const Tensor* bias;
  std::unique_ptr<Linear>* separate;
};

// The parts made into one linear stacked along the output channels (*fused)
// when `fuse` holds and they agree (quantized: format, k and group; float:
// dtype, k and bias presence), else one by one into their `separate` slots.
// A `stacked` source makes the fused layer itself (its parts agree by contract).
void make_linears(Backend& b, const LlamaModel::QuantizedLinearSource& linears,
                  const LlamaModel::StackedLinearSource& stacked, int64_t layer, bool fuse, std::unique_ptr<Linear>* fused,
                  const std::vector<LinearPart>& parts) {
  fuse = fuse && fused != nullptr && parts.size() > 1;
  if (linears && fuse && stacked) {
    std::vector<std::string> modules;
    for (const LinearPart& p : parts) modules.emplace_back(p.module);
    *fused = b.make_quantized_linear(stacked(layer, modules));
    return;
  }
  if (linears) {
    std::vector<quant::QuantizedLinear> q;
    for (const LinearPart& p : parts) q.push_back(linears(layer, p.module));
    for (const quant::QuantizedLinear& l : q) fuse = fuse && l.format == q[0].format && l.k == q[0].k && l.group == q[0].group;
    if (fuse) {
      *fused = b.make_quantized_linear(quant::concat_output_channels(std::move(q)));
      return;
    }
    for (size_t i = 0; i < parts.size(); ++i) *parts[i].separate = b.make_quantized_linear(std::move(q[i]));
    return;
  }
  std::vector<const Tensor*> weights, biases;
  const LinearPart& p0 = parts[0];
  for (const LinearPart& p : parts) {
    fuse = fuse && p.weight->rank() == 2 && p.weight->dtype() == p0.weight->dtype() && p.weight->dim(1) == p0.weight->dim(1) &&
           p.bias->empty() == p0.bias->empty() && (p.bias->empty() || p.bias->dtype() == p0.bias->dtype());
    weights.push_back(p.weight);
    biases.push_back(p.bias);
  }
  if (fuse) {
    *fused = b.make_linear(stack_rows(weights), p0.bias->empty() ? Tensor() : stack_rows(biases));
    return;
  }
  for (const LinearPart& p : parts) *p.separate = b.make_linear(*p.weight, *p.bias);
}

Tensor host_i32(const std::vector<int32_t>& v) {
  return Tensor(DType::kI32, {static_cast<int64_t>(v.size())}, const_cast<int32_t*>(v.data()));
}

}  // namespace

LlamaModel::LlamaModel(const ModelConfig& config, std::unique_ptr<Backend> backend, LlamaModelOptions options)
    : config_(config), backend_(std::move(backend)), options_(options) {
  rope_.style = RopeParams::Style::kRotateHalf;  // Hugging Face layout (GGUF q/k are permuted to it on conversion)
  rope_.head_dim = config_.head_dim;
  rope_.inv_freq = rope_inv_freq(config_);
  ws_ = std::make_unique<Workspace>();
}

LlamaModel::~LlamaModel() = default;

std::unique_ptr<LlamaModel> LlamaModel::load(const Checkpoint& checkpoint, LlamaModelOptions options) {
  if (quant::is_qoq_checkpoint(checkpoint.config())) return load_qoq_model(checkpoint, options);
  const ModelConfig config = ModelConfig::from_json(checkpoint.config());
  const LlamaWeights weights = LlamaWeights::load(checkpoint, config);
  return create(config, weights, make_backend(options.device), options);
}

std::unique_ptr<LlamaModel> LlamaModel::create(const ModelConfig& config, const LlamaWeights& w,
                                               std::unique_ptr<Backend> backend, LlamaModelOptions options) {
  return create(config, w, std::move(backend), options, nullptr);
}

std::unique_ptr<LlamaModel> LlamaModel::create(const ModelConfig& config, const LlamaWeights& w, std::unique_ptr<Backend> backend,
                                               LlamaModelOptions options, const QuantizedLinearSource& linears,
                                               const StackedLinearSource& stacked) {
  config.validate();
  QS_CHECK(static_cast<int64_t>(w.layers.size()) == config.num_layers) << w.layers.size() << " layers of weights";
  if (options.page_size <= 0) fail(ErrorCode::kInvalidArgument, "KV page size must be positive, got {}", options.page_size);
  std::unique_ptr<LlamaModel> m(new LlamaModel(config, std::move(backend), options));
  Backend& b = *m->backend_;
  // QSERVE_FUSE_PROJECTIONS=0 keeps the seven linears per layer (A/B measurements of the engine).
  const char* fuse_env = std::getenv("QSERVE_FUSE_PROJECTIONS");
  const bool fuse = options.fuse_projections && b.supports_fused_projections() && !(fuse_env && std::string(fuse_env) == "0");
  const char* fuse_aq_env = std::getenv("QSERVE_FUSE_ATTENTION_QUANT");
  m->fuse_attention_quantize_ = options.fuse_attention_quantize && !(fuse_aq_env && std::string(fuse_aq_env) == "0");
  m->embed_ = b.upload_table(w.embed_tokens);
  m->final_norm_ = b.upload(w.final_norm);
  // The making order (lm_head, then q, k, v, o, gate, up, down per layer) tells
  // the linears apart for cpu-fp16:POINTS (backend/cpu/fp16_activation_backend.h,
  // which keeps the projections separate).
  m->lm_head_ = b.make_linear(w.lm_head, {});
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LlamaLayerWeights& lw = w.layers[l];
    const auto layer = static_cast<int64_t>(l);
    auto L = std::make_unique<Layer>();
    L->input_norm = b.upload(lw.input_norm);
    L->post_norm = b.upload(lw.post_norm);
    make_linears(b, linears, stacked, layer, fuse, &L->qkv,
                 {{"q_proj", &lw.q_proj, &lw.q_bias, &L->q},
                  {"k_proj", &lw.k_proj, &lw.k_bias, &L->k},
                  {"v_proj", &lw.v_proj, &lw.v_bias, &L->v}});
    make_linears(b, linears, stacked, layer, fuse, nullptr, {{"o_proj", &lw.o_proj, &lw.o_bias, &L->o}});
    make_linears(b, linears, stacked, layer, fuse, &L->gate_up,
                 {{"gate_proj", &lw.gate_proj, &lw.gate_bias, &L->gate}, {"up_proj", &lw.up_proj, &lw.up_bias, &L->up}});
    make_linears(b, linears, stacked, layer, fuse, nullptr, {{"down_proj", &lw.down_proj, &lw.down_bias, &L->down}});
    // Linears that share an input must agree on its format (one producer writes it).
    if (!L->qkv) QS_CHECK(L->q->input_format() == L->k->input_format() && L->q->input_format() == L->v->input_format());
    if (!L->gate_up) QS_CHECK(L->gate->input_format() == L->up->input_format());
    m->layers_.push_back(std::move(L));
  }
  return m;
}

int64_t LlamaModel::num_fused_projections() const {
  int64_t n = 0;
  for (const auto& L : layers_) n += (L->qkv ? 1 : 0) + (L->gate_up ? 1 : 0);
  return n;
}

int64_t LlamaModel::kv_bytes_per_page(int64_t page_size) const {
  return config_.num_layers * backend_->kv_layer_page_bytes(page_size, config_.num_kv_heads, config_.head_dim);
}

void LlamaModel::allocate_kv_cache(int64_t num_pages, int64_t page_size) {
  if (num_pages <= 0 || page_size <= 0)
    fail(ErrorCode::kInvalidArgument, "KV cache needs positive pages and page size, got {} x {}", num_pages, page_size);
  drop_graphs();  // they address the old pools
  kv_.clear();
  for (int64_t l = 0; l < config_.num_layers; ++l)
    kv_.push_back(backend_->alloc_kv_layer(num_pages, page_size, config_.num_kv_heads, config_.head_dim));
  page_size_ = page_size;
  num_pages_ = num_pages;
  sequences_.clear();
  free_pages_.clear();
}

void LlamaModel::zero_kv_pages(std::span<const int32_t> pages) {
  for (int32_t p : pages) QS_CHECK(p >= 0 && p < num_pages_) << "page " << p;
  if (!pages.empty()) backend_->zero_kv_pages(kv_, pages);
}

// The pool grows by reallocation (pages keep their ids: the old pool is the
// prefix of the new one).
void LlamaModel::grow_pool(int64_t min_pages) {
  if (min_pages <= num_pages_) return;
  if (min_pages > options_.max_kv_pages)
    fail(ErrorCode::kResourceExhausted, "KV cache full: {} pages of {} tokens needed, limit {}", min_pages, page_size_,
         options_.max_kv_pages);
  int64_t n = std::max<int64_t>(options_.initial_kv_pages, 1);
  while (n < min_pages) n *= 2;
  n = std::min(n, options_.max_kv_pages);
  drop_graphs();  // they address the old pools
  for (KvLayer& layer : kv_) {
    KvLayer bigger = backend_->alloc_kv_layer(n, page_size_, config_.num_kv_heads, config_.head_dim);
    if (num_pages_ > 0) {
      Tensor k_prefix = rows_of(bigger.k, num_pages_), v_prefix = rows_of(bigger.v, num_pages_);
      backend_->copy(layer.k, k_prefix);
      backend_->copy(layer.v, v_prefix);
    }
    layer = std::move(bigger);
  }
  for (int64_t p = n - 1; p >= num_pages_; --p) free_pages_.push_back(static_cast<int32_t>(p));
  num_pages_ = n;
}

int64_t LlamaModel::cached_tokens(int64_t seq_id) const {
  auto it = sequences_.find(seq_id);
  return it == sequences_.end() ? 0 : it->second.length;
}

void LlamaModel::release(int64_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return;
  for (auto p = it->second.pages.rbegin(); p != it->second.pages.rend(); ++p) free_pages_.push_back(*p);
  sequences_.erase(it);
}

void LlamaModel::forward(const Batch& batch, Logits& out) {
  if (kv_.empty()) {  // first use: an empty pool that grows
    page_size_ = options_.page_size;
    num_pages_ = 0;
    for (int64_t l = 0; l < config_.num_layers; ++l)
      kv_.push_back(backend_->alloc_kv_layer(0, page_size_, config_.num_kv_heads, config_.head_dim));
  }
  // Validate everything before touching the cache.
  std::unordered_set<int64_t> seen;
  int64_t pages_needed = 0;
  for (const SequenceInput& s : batch.seqs) {
    if (!seen.insert(s.seq_id).second) fail(ErrorCode::kInvalidArgument, "sequence {} appears twice in one batch", s.seq_id);
    const int64_t cached = cached_tokens(s.seq_id);
    if (s.start < 0 || s.start > cached)
      fail(ErrorCode::kInvalidArgument, "sequence {}: start {} but {} tokens are cached", s.seq_id, s.start, cached);
    if (s.tokens.empty()) fail(ErrorCode::kInvalidArgument, "sequence {}: no new tokens", s.seq_id);
    const int64_t end = s.start + static_cast<int64_t>(s.tokens.size());
    if (end > config_.max_position_embeddings)
      fail(ErrorCode::kOutOfRange, "sequence {}: {} tokens exceed the model's context of {}", s.seq_id, end,
           config_.max_position_embeddings);
    for (int32_t id : s.tokens)
      if (id < 0 || id >= config_.vocab_size)
        fail(ErrorCode::kInvalidArgument, "sequence {}: token id {} outside the vocabulary [0, {})", s.seq_id, id,
             config_.vocab_size);
    auto it = sequences_.find(s.seq_id);
    const int64_t have = it == sequences_.end() ? 0 : static_cast<int64_t>(it->second.pages.size());
    pages_needed += std::max<int64_t>(0, (end + page_size_ - 1) / page_size_ - have);
  }
  if (pages_needed > static_cast<int64_t>(free_pages_.size()))
    grow_pool(num_pages_ + pages_needed - static_cast<int64_t>(free_pages_.size()));

  // Page tables first (the map does not move its values once all entries exist).
  for (const SequenceInput& s : batch.seqs) {
    SequenceState& st = sequences_[s.seq_id];
    const int64_t need = (s.start + static_cast<int64_t>(s.tokens.size()) + page_size_ - 1) / page_size_;
    while (static_cast<int64_t>(st.pages.size()) < need) {
      st.pages.push_back(free_pages_.back());
      free_pages_.pop_back();
    }
  }
  PagedBatch paged;
  paged.all_logits = batch.all_logits;
  for (const SequenceInput& s : batch.seqs) paged.seqs.push_back({s.tokens, s.start, sequences_.at(s.seq_id).pages, true});
  run(paged, out);
  for (const SequenceInput& s : batch.seqs) sequences_.at(s.seq_id).length = s.start + static_cast<int64_t>(s.tokens.size());
}

void LlamaModel::forward_paged(const PagedBatch& batch, Logits& out) {
  if (kv_.empty()) fail(ErrorCode::kInvalidArgument, "forward_paged before allocate_kv_cache");
  run(batch, out);
}

Tensor LlamaModel::run_to_logits(const PagedBatch& batch, std::vector<int32_t>& last_rows) {
  const ModelConfig& c = config_;
  const int64_t V = c.vocab_size;
  const int64_t S = static_cast<int64_t>(batch.seqs.size());
  if (S == 0) fail(ErrorCode::kInvalidArgument, "empty batch");

  // Step metadata (host), validated.
  AttentionBatch ab;
  ab.page_size = page_size_;
  ab.sliding_window = c.sliding_window;
  ab.token_offsets.push_back(0);
  ab.page_table_offsets.push_back(0);
  std::vector<int32_t> ids;
  last_rows.clear();  // rows whose logits are returned
  for (const PagedSequenceInput& s : batch.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) fail(ErrorCode::kInvalidArgument, "a sequence of the batch has no new tokens");
    if (s.start < 0) fail(ErrorCode::kInvalidArgument, "negative start position {}", s.start);
    const int64_t end = s.start + n;
    if (end > c.max_position_embeddings)
      fail(ErrorCode::kOutOfRange, "sequence of {} tokens exceeds the model's context of {}", end, c.max_position_embeddings);
    const int64_t pages = (end + page_size_ - 1) / page_size_;
    if (static_cast<int64_t>(s.page_table.size()) < pages)
      fail(ErrorCode::kInvalidArgument, "page table of {} pages for {} tokens of {} per page", s.page_table.size(), end, page_size_);
    for (int64_t i = 0; i < pages; ++i) {
      const int32_t p = s.page_table[i];
      if (p < 0 || p >= num_pages_) fail(ErrorCode::kInvalidArgument, "page {} outside the pool of {}", p, num_pages_);
      ab.page_table.push_back(p);
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = s.tokens[i];
      if (id < 0 || id >= V) fail(ErrorCode::kInvalidArgument, "token id {} outside the vocabulary [0, {})", id, V);
      ids.push_back(id);
      const int64_t pos = s.start + i;
      ab.positions.push_back(static_cast<int32_t>(pos));
      ab.slots.push_back(static_cast<int32_t>(s.page_table[pos / page_size_] * page_size_ + pos % page_size_));
    }
    ab.token_offsets.push_back(static_cast<int32_t>(ids.size()));
    ab.page_table_offsets.push_back(static_cast<int32_t>(ab.page_table.size()));
    ab.context_lens.push_back(static_cast<int32_t>(end));
    if (s.want_logits) last_rows.push_back(static_cast<int32_t>(ids.size() - 1));
  }
  // A decode step of up to max_graph_batch sequences that all want logits
  // runs as a captured graph: padded to the next captured size, laid out for
  // a power-of-two context bound (the key), so that one graph serves the
  // step after step as the sequences grow.
  Backend& b = *backend_;
  const int64_t real_rows = static_cast<int64_t>(last_rows.size());
  bool graph_step = options_.cuda_graphs && b.supports_graphs() && !batch.all_logits && real_rows == S &&
                    static_cast<int64_t>(ids.size()) == S && S <= options_.max_graph_batch;
  uint64_t graph_key = 0;
  if (graph_step) {
    const int64_t padded = graph_batch_size(S);
    int32_t bound = 64;
    for (int32_t len : ab.context_lens) while (bound < len) bound *= 2;
    ab.layout_max_context = bound;
    for (int64_t p = S; p < padded; ++p) {  // padding: context 0, nothing written, output zero
      ids.push_back(0);
      ab.positions.push_back(0);
      ab.slots.push_back(-1);
      ab.token_offsets.push_back(static_cast<int32_t>(ids.size()));
      ab.page_table_offsets.push_back(static_cast<int32_t>(ab.page_table.size()));
      ab.context_lens.push_back(0);
    }
    graph_key = static_cast<uint64_t>(padded) | (static_cast<uint64_t>(bound) << 32);
  }
  const int64_t T = static_cast<int64_t>(ids.size());

  // Workspace for T tokens.
  ensure_workspace(T, std::max<int64_t>(T, 2 * ws_->capacity));
  Workspace& w = *ws_;
  const int64_t logit_rows = batch.all_logits || graph_step ? T : static_cast<int64_t>(last_rows.size());
  if (w.logits.empty() || w.logits.dim(0) < logit_rows) {  // [rows, V] can be large: sized on its own
    w.logits = b.alloc(b.float_dtype(), {std::max<int64_t>(logit_rows, w.logits.empty() ? 0 : 2 * w.logits.dim(0)), V});
    ++workspace_epoch_;
  }
  Tensor x = rows_of(w.x, T);
  StepBuffers bufs{rows_of(w.attn_in, T), rows_of(w.o_in, T),  rows_of(w.mlp_in, T),  rows_of(w.down_in, T),
                   rows_of(w.q, T),       rows_of(w.k, T),     rows_of(w.v, T),       rows_of(w.qkv, T),
                   rows_of(w.attn, T),    rows_of(w.o_out, T), rows_of(w.gate, T),    rows_of(w.up, T),
                   rows_of(w.gate_up, T), rows_of(w.mlp_out, T)};

  const float eps = c.rms_norm_eps;
  b.begin_step(ab);  // a device backend uploads the step's metadata once, here
  b.embedding(embed_, host_i32(ids), x);
  if (graph_step) {
    // Layers and lm_head over every row (the padding too): no host input
    // inside, so the same device work replays for the next step of this key.
    auto run_graph_body = [&] {
      run_layers(x, ab, bufs);
      Activations head_in = rows_of(w.head_in, T);
      b.rms_norm(x, final_norm_, eps, head_in);
      Tensor all = rows_of(w.logits, T);
      lm_head_->forward(head_in, all);
    };
    GraphState& g = graphs_[graph_key];
    const std::pair<uint64_t, uint64_t> epoch{b.memory_epoch(), workspace_epoch_};
    if (g.captured && g.epoch == epoch) {
      b.graph_launch(graph_key);
    } else if (g.warmed && g.epoch == epoch) {  // the previous step of this key allocated nothing new
      b.capture_begin();
      run_graph_body();
      b.capture_end(graph_key);
      QS_CHECK(b.memory_epoch() == epoch.first) << "a buffer was reallocated while capturing";
      g.captured = true;
      b.graph_launch(graph_key);
    } else {  // uncaptured: warms up workspaces, library plans and kernel attributes for this key
      run_graph_body();
      g = GraphState{};
      g.warmed = true;
      g.epoch = {b.memory_epoch(), workspace_epoch_};
    }
    last_rows.resize(S);
    return rows_of(w.logits, S);
  }
  run_layers(x, ab, bufs);

  // Only the rows that need logits go through the final norm and lm_head
  // (every row for all_logits).
  const int64_t R = batch.all_logits ? T : static_cast<int64_t>(last_rows.size());
  if (R == 0) return {};
  Tensor head_x = x;
  if (!batch.all_logits) {
    head_x = rows_of(w.last_x, R);
    b.gather_rows(x, host_i32(last_rows), head_x);
  }
  Activations head_in = rows_of(w.head_in, R);
  b.rms_norm(head_x, final_norm_, eps, head_in);
  Tensor logits = rows_of(w.logits, R);
  lm_head_->forward(head_in, logits);
  return logits;
}

// The decoder layers over x [T, H] (then x += the last MLP output).
void LlamaModel::reserve_workspace(int64_t max_tokens, int64_t max_seqs) {
  QS_CHECK(max_tokens > 0 && max_seqs > 0);
  const int64_t rows = workspace_rows(max_tokens, max_seqs);
  ensure_workspace(rows, rows);
}

int64_t LlamaModel::workspace_capacity() const { return ws_->capacity; }

// The activation buffers of a step of `tokens` tokens: reallocated (to
// `capacity` rows) only when they hold fewer.
void LlamaModel::ensure_workspace(int64_t tokens, int64_t capacity) {
  Backend& b = *backend_;
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  Workspace& w = *ws_;
  const Layer& L0 = *layers_[0];
  if (w.capacity < tokens) {
    // Which layouts the layers use (fused and separate may mix when parts differ in format).
    bool any_qkv = false, any_split_qkv = false, any_gate_up = false, any_split_gate_up = false;
    for (const auto& L : layers_) {
      (L->qkv ? any_qkv : any_split_qkv) = true;
      (L->gate_up ? any_gate_up : any_split_gate_up) = true;
    }
    const int64_t cap = std::max(tokens, capacity);
    const DType f = b.float_dtype();
    w.x = b.alloc(f, {cap, H});
    w.attn_in = b.alloc_activations((L0.qkv ? L0.qkv : L0.q)->input_format(), cap, H);
    w.o_in = b.alloc_activations(L0.o->input_format(), cap, c.q_dim());
    w.mlp_in = b.alloc_activations((L0.gate_up ? L0.gate_up : L0.gate)->input_format(), cap, H);
    w.down_in = b.alloc_activations(L0.down->input_format(), cap, I);
    w.head_in = b.alloc_activations(lm_head_->input_format(), cap, H);
    w.q = b.alloc(f, {cap, c.q_dim()});
    w.k = any_split_qkv ? b.alloc(f, {cap, c.kv_dim()}) : Tensor();
    w.v = any_split_qkv ? b.alloc(f, {cap, c.kv_dim()}) : Tensor();
    w.qkv = any_qkv ? b.alloc(f, {cap, c.q_dim() + 2 * c.kv_dim()}) : Tensor();
    w.attn = b.alloc(f, {cap, c.q_dim()});
    w.o_out = b.alloc(f, {cap, H});
    w.gate = any_split_gate_up ? b.alloc(f, {cap, I}) : Tensor();
    w.up = any_split_gate_up ? b.alloc(f, {cap, I}) : Tensor();
    w.gate_up = any_gate_up ? b.alloc(f, {cap, 2 * I}) : Tensor();
    w.mlp_out = b.alloc(f, {cap, H});
    w.last_x = b.alloc(f, {cap, H});
    w.capacity = cap;
    ++workspace_epoch_;
  }
}

void LlamaModel::run_layers(Tensor& x, const AttentionBatch& ab, StepBuffers& s) {
  const ModelConfig& c = config_;
  Backend& b = *backend_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const float eps = c.rms_norm_eps;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const Layer& L = *layers_[l];
    // x += previous MLP output; attention input = norm(x)
    if (l == 0) b.rms_norm(x, L.input_norm, eps, s.attn_in);
    else b.add_rms_norm(x, s.mlp_out, L.input_norm, eps, s.attn_in);
    if (L.qkv) {
      L.qkv->forward(s.attn_in, s.qkv);
      b.rope_kv_write_fused(s.qkv, s.q, rope_, ab, kv_[l]);
    } else {
      L.q->forward(s.attn_in, s.q);
      L.k->forward(s.attn_in, s.k);
      L.v->forward(s.attn_in, s.v);
      b.rope_kv_write(s.q, s.k, s.v, rope_, ab, kv_[l]);
    }
    if (fuse_attention_quantize_) {
      b.attention_quantize(s.q, kv_[l], ab, scale, s.attn, s.o_in);
    } else {
      b.attention(s.q, kv_[l], ab, scale, s.attn);
      b.quantize(s.attn, s.o_in);
    }
    L.o->forward(s.o_in, s.o_out);
    // x += attention output; MLP input = norm(x)
    b.add_rms_norm(x, s.o_out, L.post_norm, eps, s.mlp_in);
    if (L.gate_up) {
      L.gate_up->forward(s.mlp_in, s.gate_up);
      b.silu_mul_fused(s.gate_up, s.down_in);
    } else {
      L.gate->forward(s.mlp_in, s.gate);
      L.up->forward(s.mlp_in, s.up);
      b.silu_mul(s.gate, s.up, s.down_in);
    }
    L.down->forward(s.down_in, s.mlp_out);
  }
  b.add(x, s.mlp_out);
}

// Captured sizes: 1, 2, 4, 8, then multiples of 16.
int64_t LlamaModel::graph_batch_size(int64_t seqs) {
  if (seqs <= 8) {
    int64_t b = 1;
    while (b < seqs) b *= 2;
    return b;
  }
  return (seqs + 15) / 16 * 16;
}

void LlamaModel::drop_graphs() {
  graphs_.clear();
  backend_->drop_graphs();
}

void LlamaModel::run(const PagedBatch& batch, Logits& out) {
  std::vector<int32_t> last_rows;
  const Tensor logits = run_to_logits(batch, last_rows);
  const int64_t V = config_.vocab_size;
  out.vocab_size = V;
  out.all.clear();
  out.last.clear();
  if (logits.empty()) return;
  Tensor host = backend_->download(logits);  // the step's one synchronization
  const int64_t R = static_cast<int64_t>(last_rows.size());
  if (batch.all_logits) {
    const int64_t T = logits.dim(0);
    out.all.assign(host.data_as<float>(), host.data_as<float>() + T * V);
    out.last.resize(R * V);
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(out.last.data() + r * V, out.all.data() + static_cast<int64_t>(last_rows[r]) * V, V * sizeof(float));
    return;
  }
  out.last.assign(host.data_as<float>(), host.data_as<float>() + R * V);
}

bool LlamaModel::supports_sampling() const { return backend_->supports_sampling(); }

void LlamaModel::forward_paged_sampled(const PagedBatch& batch, std::span<const SamplingParams> params,
                                       std::span<const uint64_t> steps, std::vector<int32_t>& tokens) {
  if (kv_.empty()) fail(ErrorCode::kInvalidArgument, "forward_paged before allocate_kv_cache");
  if (batch.all_logits) fail(ErrorCode::kInvalidArgument, "sampling takes the last tokens' logits, not all_logits");
  QS_CHECK(backend_->supports_sampling()) << backend_->name() << " does not sample";
  std::vector<int32_t> last_rows;
  const Tensor logits = run_to_logits(batch, last_rows);
  const size_t R = last_rows.size();
  QS_CHECK(params.size() == R && steps.size() == R) << params.size() << " sampling params for " << R << " rows";
  tokens.assign(R, 0);
  if (R > 0) backend_->sample(logits, params, steps, tokens);
}

}  // namespace qserve
