#include "engine/kv_memory_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace qserve {
namespace {

constexpr int64_t kDeviceFixedReserve = int64_t{512} << 20;  // GEMM workspace, CUDA graphs, sampling buffers

int64_t linear_bytes(quant::WeightFormat f, int64_t n, int64_t k, int64_t group) {
  const int64_t groups = group > 0 ? (k + group - 1) / group : 1;
  switch (f) {
    case quant::WeightFormat::kF16: return n * k * 2;
    case quant::WeightFormat::kW8PerChannel: return n * k + n * 2;                  // q + fp16 scale
    case quant::WeightFormat::kW4PerChannel: return n * k / 2 + n * 3;              // + fp16 scale, zero
    case quant::WeightFormat::kW4G128: return n * k / 2 + n * 2 + n * groups * 2;  // + s1, s2 / zero per group
    case quant::WeightFormat::kW4A16: return n * k / 2 + n * groups * 3;           // + fp16 scale, zero per group
  }
  return n * k * 2;
}

}  // namespace

std::string format_gib(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

int64_t estimate_weight_bytes(const ModelConfig& c, quant::WeightFormat format, int64_t group) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  int64_t per_layer = linear_bytes(format, c.q_dim(), H, group) + 2 * linear_bytes(format, c.kv_dim(), H, group) +
                      linear_bytes(format, H, c.q_dim(), group) + 2 * linear_bytes(format, I, H, group) +
                      linear_bytes(format, H, I, group) + 2 * H * 2;
  const int64_t outer = c.vocab_size * H * 2 * (c.tie_word_embeddings ? 1 : 2) + H * 2;
  return c.num_layers * per_layer + outer;
}

int64_t workspace_rows(int64_t max_batched_tokens, int64_t max_num_seqs) {
  return std::max<int64_t>({1, max_batched_tokens, (max_num_seqs + 15) / 16 * 16});
}

int64_t estimate_workspace_bytes(const ModelConfig& c, int64_t max_batched_tokens, int64_t max_num_seqs,
                                 int64_t float_bytes, bool device) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  // Per token: x, attn_in, mlp_in, head_in, o_out, mlp_out, last_x [H]; q, attn, o_in [q_dim];
  // q|k|v [q_dim + 2 kv_dim] (or k, v); gate|up [2I] (or gate, up), down_in [I]
  // (LlamaModel's workspace, fused projections: q twice, the GEMM's and the rotated one).
  const int64_t per_token = (7 * H + 4 * c.q_dim() + 2 * c.kv_dim() + 3 * I) * float_bytes;
  const int64_t tokens = workspace_rows(max_batched_tokens, max_num_seqs);
  // Logits of the sampled rows: at most one per sequence of a step; device rows + host f32 copy.
  const int64_t rows = std::max<int64_t>(1, std::min(max_num_seqs, std::max<int64_t>(1, max_batched_tokens)));
  const int64_t logits = 2 * rows * c.vocab_size * 4;
  return tokens * per_token + logits + (device ? kDeviceFixedReserve : 0);
}

KvMemoryPlan plan_kv_memory(const KvMemoryInputs& in) {
  QS_CHECK(in.kv_bytes_per_page > 0);
  if (in.card_bytes <= 0) fail(ErrorCode::kInvalidArgument, "the memory budget must be positive");
  if (!(in.utilization > 0.0 && in.utilization <= 1.0))
    fail(ErrorCode::kInvalidArgument, "--gpu-memory-utilization must be in (0, 1], got {}", in.utilization);
  KvMemoryPlan p;
  p.budget_bytes = static_cast<int64_t>(static_cast<double>(in.card_bytes) * in.utilization);
  p.kv_bytes = p.budget_bytes - in.used_bytes - in.reserve_bytes;
  if (in.free_bytes > 0) p.kv_bytes = std::min(p.kv_bytes, in.free_bytes - in.reserve_bytes);
  p.num_pages = p.kv_bytes > 0 ? p.kv_bytes / in.kv_bytes_per_page : 0;
  if (p.num_pages <= 0) {
    fail(ErrorCode::kResourceExhausted,
         "{}: no room for the KV cache: the budget is {} ({:.2f} x {}), the weights and runtime take {} and the "
         "workspace {}, one KV page needs {} bytes{}",
         in.what, format_gib(p.budget_bytes), in.utilization, format_gib(in.card_bytes), format_gib(in.used_bytes),
         format_gib(in.reserve_bytes), in.kv_bytes_per_page,
         in.free_bytes > 0 ? fmt::format(" (device free: {})", format_gib(in.free_bytes)) : "");
  }
  return p;
}

void check_weights_fit(int64_t weight_bytes, int64_t card_bytes, double utilization, const std::string& what) {
  if (card_bytes <= 0) return;
  const auto budget = static_cast<int64_t>(static_cast<double>(card_bytes) * utilization);
  if (weight_bytes >= budget) {
    fail(ErrorCode::kResourceExhausted, "{}: the weights ({}) do not fit the memory budget ({} = {:.2f} x {})", what,
         format_gib(weight_bytes), format_gib(budget), utilization, format_gib(card_bytes));
  }
}

}  // namespace qserve
