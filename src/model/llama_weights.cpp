#include "model/llama_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace qserve {
namespace {

class Loader {
 public:
  Loader(const Checkpoint& checkpoint) : ckpt_(checkpoint) {}

  Tensor get(const std::string& name, std::vector<int64_t> shape) const {
    if (!ckpt_.has(name)) fail(ErrorCode::kNotFound, "{}: missing tensor {} (expected shape {})", ckpt_.path(), name, shape);
    return check(name, ckpt_.get(name), shape);
  }

  // Present only when the config says so; present anyway is an error too (a
  // bias we would silently drop changes the model).
  Tensor get_optional(const std::string& name, std::vector<int64_t> shape, bool expected) const {
    if (expected) return get(name, std::move(shape));
    if (ckpt_.has(name))
      fail(ErrorCode::kCorruptData, "{}: has tensor {} that its config.json does not call for", ckpt_.path(), name);
    return {};
  }

 private:
  Tensor check(const std::string& name, const Tensor& t, const std::vector<int64_t>& shape) const {
    const DType d = t.dtype();
    if (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16 && !dtype_is_blocked(d))
      fail(ErrorCode::kUnsupported, "{}: tensor {} is {}; supported: F32, F16, BF16 and GGUF's block formats", ckpt_.path(), name,
           dtype_name(d));
    if (t.shape() != shape)
      fail(ErrorCode::kCorruptData, "{}: tensor {} has shape {}, expected {} from config.json", ckpt_.path(), name, t.shape(),
           shape);
    return t;
  }

  const Checkpoint& ckpt_;
};

}  // namespace

LlamaWeights LlamaWeights::load(const Checkpoint& checkpoint, const ModelConfig& c) {
  const Loader l(checkpoint);
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim();
  LlamaWeights w;
  w.embed_tokens = l.get("model.embed_tokens.weight", {V, H});
  w.final_norm = l.get("model.norm.weight", {H});
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed_tokens;  // a checkpoint may carry a copy anyway: tied means the embedding is used
  } else {
    w.lm_head = l.get("lm_head.weight", {V, H});
  }
  w.layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    LlamaLayerWeights& L = w.layers[i];
    L.input_norm = l.get(p + "input_layernorm.weight", {H});
    L.q_proj = l.get(p + "self_attn.q_proj.weight", {q_dim, H});
    L.k_proj = l.get(p + "self_attn.k_proj.weight", {kv_dim, H});
    L.v_proj = l.get(p + "self_attn.v_proj.weight", {kv_dim, H});
    L.o_proj = l.get(p + "self_attn.o_proj.weight", {H, q_dim});
    L.q_bias = l.get_optional(p + "self_attn.q_proj.bias", {q_dim}, c.attention_bias);
    L.k_bias = l.get_optional(p + "self_attn.k_proj.bias", {kv_dim}, c.attention_bias);
    L.v_bias = l.get_optional(p + "self_attn.v_proj.bias", {kv_dim}, c.attention_bias);
    L.o_bias = l.get_optional(p + "self_attn.o_proj.bias", {H}, c.o_proj_bias);
    L.post_norm = l.get(p + "post_attention_layernorm.weight", {H});
    L.gate_proj = l.get(p + "mlp.gate_proj.weight", {I, H});
    L.up_proj = l.get(p + "mlp.up_proj.weight", {I, H});
    L.down_proj = l.get(p + "mlp.down_proj.weight", {H, I});
    L.gate_bias = l.get_optional(p + "mlp.gate_proj.bias", {I}, c.mlp_bias);
    L.up_bias = l.get_optional(p + "mlp.up_proj.bias", {I}, c.mlp_bias);
    L.down_bias = l.get_optional(p + "mlp.down_proj.bias", {H}, c.mlp_bias);
  }
  return w;
}

}  // namespace qserve
