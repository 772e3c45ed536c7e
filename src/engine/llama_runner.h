// The model runner of the Llama family on a LlamaModel (src/engine/llama_model.h):
// the CPU FP32 reference today, any Backend the model is created on.
#pragma once

#include <memory>
#include <string>

#include "engine/llama_model.h"
#include "engine/model_runner.h"

namespace qserve {

class LlamaModelRunner : public ModelRunner {
 public:
  LlamaModelRunner(std::unique_ptr<LlamaModel> model, std::string name);

  std::string name() const override { return name_; }
  std::string architecture() const override;
  int vocab_size() const override;
  int max_model_len() const override;
  int64_t kv_bytes_per_page(int page_size) const override;
  void allocate_kv_cache(int64_t num_pages, int page_size) override;
  std::span<const float> execute(const RunnerBatch& batch) override;
  std::vector<int32_t> eos_token_ids() const override;
  double kv_zero_seconds() const override { return kv_zero_seconds_; }

  LlamaModel& model() { return *model_; }

 private:
  std::unique_ptr<LlamaModel> model_;
  std::string name_;
  PagedBatch paged_;  // reused between steps
  Logits logits_;
  double kv_zero_seconds_ = 0;
};

}  // namespace qserve
