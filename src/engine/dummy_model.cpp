#include "engine/dummy_model.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "engine/backend_factory.h"
#include "engine/dummy_arch.h"
#include "engine/dummy_weights.h"

namespace qserve {
namespace {

// [out, in] of a block linear.
std::pair<int64_t, int64_t> linear_shape(const ModelConfig& c, const std::string& module) {
  if (module == "q_proj") return {c.q_dim(), c.hidden_size};
  if (module == "k_proj" || module == "v_proj") return {c.kv_dim(), c.hidden_size};
  if (module == "o_proj") return {c.hidden_size, c.q_dim()};
  if (module == "gate_proj" || module == "up_proj") return {c.intermediate_size, c.hidden_size};
  QS_CHECK(module == "down_proj") << "unknown module " << module;
  return {c.hidden_size, c.intermediate_size};
}

}  // namespace

std::unique_ptr<LlamaModel> load_dummy_model(const DummyModelOptions& dummy, LlamaModelOptions options) {
  const ModelConfig config = dummy_arch_config(dummy.arch);
  const PrecisionChoice p = dummy.precision;
  const quant::WeightFormat format = p.weight_format();
  if (format != quant::WeightFormat::kF16 && format != quant::WeightFormat::kW8PerChannel) {
    if (config.hidden_size % 2 != 0 || config.intermediate_size % 2 != 0 || config.q_dim() % 2 != 0)
      fail(ErrorCode::kUnsupported, "--arch {}: 4-bit weights need even input widths", dummy.arch);
  }

  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const Clock::time_point start = Clock::now();
  // Float parts: embedding rows O(1) (the residual stream's scale), lm_head
  // giving logits of std ~1, norm gains near 1.
  const int64_t H = config.hidden_size, V = config.vocab_size;
  LlamaWeights w;
  w.embed_tokens = random_f16_tensor({V, H}, 0.0f, 1.7f, dummy_tensor_seed(dummy.seed, -1, "embed_tokens"));
  w.lm_head = random_f16_tensor({V, H}, 0.0f, std::sqrt(3.0f / static_cast<float>(H)),
                                dummy_tensor_seed(dummy.seed, -1, "lm_head"));
  w.final_norm = random_f16_tensor({H}, 1.0f, 0.1f, dummy_tensor_seed(dummy.seed, -1, "norm"));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    LlamaLayerWeights lw;
    lw.input_norm = random_f16_tensor({H}, 1.0f, 0.1f, dummy_tensor_seed(dummy.seed, l, "input_layernorm"));
    lw.post_norm = random_f16_tensor({H}, 1.0f, 0.1f, dummy_tensor_seed(dummy.seed, l, "post_attention_layernorm"));
    w.layers.push_back(std::move(lw));
  }

  const double float_s = seconds_since(start);

  std::optional<KvDtype> kv_dtype;
  if (const auto bits = kv_quant_bits(p)) kv_dtype = *bits == 4 ? KvDtype::kInt4 : KvDtype::kInt8;
  std::unique_ptr<Backend> backend = make_backend(options.device, kv_dtype);

  // One layer at a time: generated, handed to the backend (which repacks or
  // keeps it), and the canonical copy dropped before the next one.
  const uint64_t seed = dummy.seed;
  const int64_t group = p.group > 0 ? p.group : 0;
  double linears_s = 0;  // generating the quantized linears (the rest of create: the backend's repack and upload)
  // One module's layer, or the fused projections' parts made stacked (as
  // concat_output_channels of the parts would be).
  auto stacked = [&config, format, group, seed, &linears_s, &seconds_since](int64_t l,
                                                                          const std::vector<std::string>& modules) {
    const Clock::time_point t = Clock::now();
    std::vector<int64_t> ns;
    std::vector<uint64_t> seeds;
    int64_t k = 0;
    for (const std::string& module : modules) {
      const auto [n, k_part] = linear_shape(config, module);
      QS_CHECK(k == 0 || k == k_part) << module << " has k " << k_part << ", the first part " << k;
      k = k_part;
      ns.push_back(n);
      seeds.push_back(dummy_tensor_seed(seed, l, module.c_str()));
    }
    quant::QuantizedLinear q = random_stacked_linear(format, ns, k, group, seeds);
    linears_s += seconds_since(t);
    return q;
  };
  auto source = [&stacked](int64_t l, const std::string& module) { return stacked(l, {module}); };
  const Clock::time_point create_start = Clock::now();
  std::unique_ptr<LlamaModel> model = LlamaModel::create(config, w, std::move(backend), options, source, stacked);
  const double create_s = seconds_since(create_start);
  // Where a dummy load's time goes (it dominates short engine benchmarks).
  spdlog::info("dummy weights: {:.2f} s float tensors, {:.2f} s starting the backend, {:.2f} s quantized linears, "
               "{:.2f} s in the backend (making the linears: repack, upload)",
               float_s, seconds_since(start) - float_s - create_s, linears_s, create_s - linears_s);
  return model;
}

}  // namespace qserve
