// The model runner of the Llama family on a LlamaModel (src/engine/llama_model.h):
// the CPU FP32 reference or the CUDA backend (which can also sample, so that a
// step returns token ids instead of [batch, vocab] logits).
#pragma once

#include <memory>
#include <string>

#include "engine/llama_model.h"
#include "engine/model_runner.h"

namespace qserve {

class LlamaModelRunner : public ModelRunner {
 public:
  // device_sampling: sample on the backend when it can (false: always return logits).
  LlamaModelRunner(std::unique_ptr<LlamaModel> model, std::string name, bool device_sampling = true);

  std::string name() const override { return name_; }
  std::string architecture() const override;
  int vocab_size() const override;
  int max_model_len() const override;
  int64_t kv_bytes_per_page(int page_size) const override;
  void allocate_kv_cache(int64_t num_pages, int page_size) override;
  void reserve_workspace(int max_num_batched_tokens, int max_num_seqs) override;
  std::span<const float> execute(const RunnerBatch& batch) override;
  bool can_sample_on_device() const override;
  std::span<const int32_t> execute_and_sample(const RunnerBatch& batch, std::span<const SamplingParams> params,
                                              std::span<const uint64_t> steps) override;
  std::vector<int32_t> eos_token_ids() const override;
  double kv_zero_seconds() const override { return kv_zero_seconds_; }
  StepTiming step_timing() const override { return model_->backend().step_timing(); }

  LlamaModel& model() { return *model_; }

 private:
  std::unique_ptr<LlamaModel> model_;
  std::string name_;
  void prepare(const RunnerBatch& batch);  // zeroes fresh pages, fills paged_

  PagedBatch paged_;  // reused between steps
  Logits logits_;
  std::vector<int32_t> tokens_;
  bool device_sampling_ = true;
  double kv_zero_seconds_ = 0;
};

}  // namespace qserve
