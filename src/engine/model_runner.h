// The model runner: executes one scheduler step on a backend. A step is a
// batch of sequences, each computing a contiguous run of its tokens (a prefill
// chunk, a whole prompt, or one decode token) over its KV page table, and
// returns the logits of the positions to sample.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"       // StepTiming
#include "backend/cpu/sampling.h"  // SamplingParams
#include "engine/kv_block_manager.h"

namespace qserve {

// One sequence's share of a step.
struct RunnerSeq {
  SeqId seq = 0;
  std::span<const int32_t> token_ids;   // [n] the tokens to compute, positions start .. start+n-1
  int start = 0;                        // position of token_ids[0]; K/V of [0, start) is cached
  std::span<const int32_t> page_table;  // [ceil((start+n)/page_size)] physical pages of the sequence
  bool sample = false;                  // return the logits of its last token
};

struct RunnerBatch {
  std::vector<RunnerSeq> seqs;
  // Pages newly handed to a sequence this step: they may hold another
  // request's K/V and must be zeroed before this step writes them.
  std::span<const int32_t> fresh_pages;
  int num_tokens = 0;                   // sum of token_ids sizes
  int num_samples = 0;                  // seqs with sample == true
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual std::string name() const = 0;          // model name, e.g. "SmolLM2-135M-Instruct"
  virtual std::string architecture() const = 0;  // e.g. "llama"
  virtual int vocab_size() const = 0;
  virtual int max_model_len() const = 0;         // the model's context length
  // Bytes one KV page of `page_size` tokens takes (all layers, K and V, scales).
  virtual int64_t kv_bytes_per_page(int page_size) const = 0;
  // Allocates the paged KV cache; called once, before execute().
  virtual void allocate_kv_cache(int64_t num_pages, int page_size) = 0;
  // Sizes the step workspace for the engine's limits once, before execute()
  // (engine/kv_memory_plan.h counts it in the memory plan). Default: nothing.
  virtual void reserve_workspace(int max_num_batched_tokens, int max_num_seqs) {
    (void)max_num_batched_tokens, (void)max_num_seqs;
  }

  // Runs one step: writes the K/V of every token in the batch into its pages
  // and returns the logits of the sampled positions, [num_samples, vocab_size]
  // fp32 row-major in batch order. Valid until the next call.
  virtual std::span<const float> execute(const RunnerBatch& batch) = 0;

  // Sampling on the device (GPU backends): the same step, but each sampled
  // row is drawn on the device with params[i] at step steps[i] (the rules of
  // backend/cpu/sampling.h) and only the tokens come back, [num_samples] in
  // batch order. The engine uses it when every sampled request's parameters
  // are ones those rules express (no repetition penalty, min-p, logprobs or
  // suppressed ids; top-k and top-p not both); else execute().
  virtual bool can_sample_on_device() const { return false; }
  virtual std::span<const int32_t> execute_and_sample(const RunnerBatch& batch, std::span<const SamplingParams> params,
                                                      std::span<const uint64_t> steps) {
    (void)batch, (void)params, (void)steps;
    return {};
  }

  // EOS ids from the model's own config (used when the engine has no tokenizer).
  virtual std::vector<int32_t> eos_token_ids() const { return {}; }
  // Time spent zeroing fresh pages so far (the cost of the user-data guarantee).
  virtual double kv_zero_seconds() const { return 0.0; }
  // The device's busy and idle time over the steps so far (backend.h,
  // StepTiming; zeros unless the backend measures it).
  virtual StepTiming step_timing() const { return {}; }
};

}  // namespace qserve
