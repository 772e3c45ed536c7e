#include "engine/llama_runner.h"

#include <chrono>

namespace qserve {

LlamaModelRunner::LlamaModelRunner(std::unique_ptr<LlamaModel> model, std::string name, bool device_sampling)
    : model_(std::move(model)), name_(std::move(name)), device_sampling_(device_sampling) {}

std::string LlamaModelRunner::architecture() const { return architecture_name(model_->config().architecture); }
int LlamaModelRunner::vocab_size() const { return static_cast<int>(model_->config().vocab_size); }
int LlamaModelRunner::max_model_len() const { return static_cast<int>(model_->config().max_position_embeddings); }
int64_t LlamaModelRunner::kv_bytes_per_page(int page_size) const { return model_->kv_bytes_per_page(page_size); }
void LlamaModelRunner::allocate_kv_cache(int64_t num_pages, int page_size) {
  model_->allocate_kv_cache(num_pages, page_size);
}
void LlamaModelRunner::reserve_workspace(int max_num_batched_tokens, int max_num_seqs) {
  model_->reserve_workspace(max_num_batched_tokens, max_num_seqs);
}

std::vector<int32_t> LlamaModelRunner::eos_token_ids() const {
  std::vector<int32_t> ids;
  for (int64_t id : model_->config().eos_token_ids) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

void LlamaModelRunner::prepare(const RunnerBatch& batch) {
  if (!batch.fresh_pages.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    model_->zero_kv_pages(batch.fresh_pages);
    kv_zero_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  paged_.seqs.clear();
  for (const RunnerSeq& s : batch.seqs) paged_.seqs.push_back({s.token_ids, s.start, s.page_table, s.sample});
  paged_.all_logits = false;
}

std::span<const float> LlamaModelRunner::execute(const RunnerBatch& batch) {
  prepare(batch);
  model_->forward_paged(paged_, logits_);
  return logits_.last;
}

bool LlamaModelRunner::can_sample_on_device() const { return device_sampling_ && model_->supports_sampling(); }

std::span<const int32_t> LlamaModelRunner::execute_and_sample(const RunnerBatch& batch, std::span<const SamplingParams> params,
                                                              std::span<const uint64_t> steps) {
  prepare(batch);
  model_->forward_paged_sampled(paged_, params, steps, tokens_);
  return tokens_;
}

}  // namespace qserve
