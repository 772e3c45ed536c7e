// How many KV pages a memory budget holds (vLLM's --gpu-memory-utilization
// and the --memory-budget emulation of a smaller card, docs/serving-benchmark.md):
//
//   card    = --memory-budget if given, else the device's total memory
//   budget  = card x --gpu-memory-utilization
//   KV      = budget - used - workspace reserve
//   pages   = KV / kv_bytes_per_page, and never more than the device can still allocate
//
// `used` is what the device holds once the model is loaded (weights, the
// runtime's context, other processes: total - free), so an emulated 48 GB
// card pays for everything a real one would. Where the backend does not know
// its memory (the CPU), `used` is the weights' estimate below, so the CPU
// computes the page count the same budget would give on a device.
#pragma once

#include <cstdint>
#include <string>

#include "model/model_config.h"
#include "quant/precision.h"

namespace qserve {

// Device bytes of a model's weights in `format` (block linears) with FP16
// embedding, lm_head and norms: the canonical sizes of quant/weight_format.h.
int64_t estimate_weight_bytes(const ModelConfig& config, quant::WeightFormat format, int64_t group);
// Rows of the activation workspace an engine reserves up front
// (LlamaModel::reserve_workspace): a step of up to `max_batched_tokens`
// tokens, or a decode step of up to `max_num_seqs` sequences padded to a
// captured graph's batch (1, 2, 4, 8, then multiples of 16).
int64_t workspace_rows(int64_t max_batched_tokens, int64_t max_num_seqs);
// Activation buffers of workspace_rows(...) rows (reserved once, exactly) and
// the logits of min(max_num_seqs, max_batched_tokens) rows (device rows + host
// f32 copy), with `float_bytes` per float; plus a fixed reserve for the
// backend's own workspaces (GEMM workspace, graphs, sampling; the W4A16
// GEMM's 64 MiB fp16 slice scratch) on a device. No W4A8 weight format needs
// an INT8 copy of its weights: those GEMMs dequantize in registers at every
// m (docs/gemm-hopper.md).
int64_t estimate_workspace_bytes(const ModelConfig& config, int64_t max_batched_tokens, int64_t max_num_seqs,
                                 int64_t float_bytes, bool device);

struct KvMemoryInputs {
  int64_t card_bytes = 0;       // > 0: the (emulated) card size
  double utilization = 0.9;     // (0, 1]
  int64_t used_bytes = 0;       // held before the KV cache (weights, context, ...)
  int64_t free_bytes = 0;       // > 0: what the device can still allocate (a hard cap)
  int64_t reserve_bytes = 0;    // workspace reserve
  int64_t kv_bytes_per_page = 0;
  std::string what;             // "llama-2-70b fp16" (error messages)
};

struct KvMemoryPlan {
  int64_t budget_bytes = 0;  // card x utilization
  int64_t kv_bytes = 0;      // for pages
  int64_t num_pages = 0;
};

// Error(kResourceExhausted) when the weights and the reserve leave no page,
// naming the sizes in GiB.
KvMemoryPlan plan_kv_memory(const KvMemoryInputs& in);

// Before loading: Error(kResourceExhausted) if the weights alone exceed the
// budget (so a 70B model in fp16 on an 80 GB card fails before its weights are made).
void check_weights_fit(int64_t weight_bytes, int64_t card_bytes, double utilization, const std::string& what);

// "12.34 GiB"
std::string format_gib(int64_t bytes);

}  // namespace qserve
