// The weights of a Llama-family model (Llama, Mistral, Qwen2) as they come
// from a checkpoint: Hugging Face tensor names, F32 / F16 / BF16 host tensors
// (views of the memory-mapped files), each checked against the config.
// Backends convert them to their own formats when they build their layers.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/checkpoint.h"
#include "model/model_config.h"

namespace qserve {

struct LlamaLayerWeights {
  Tensor input_norm;  // model.layers.N.input_layernorm.weight           [H]
  Tensor q_proj;      // self_attn.q_proj.weight                           [Hq * D, H]
  Tensor k_proj;      // self_attn.k_proj.weight                           [Hkv * D, H]
  Tensor v_proj;      // self_attn.v_proj.weight                           [Hkv * D, H]
  Tensor o_proj;      // self_attn.o_proj.weight                           [H, Hq * D]
  Tensor q_bias;      // self_attn.q_proj.bias  [Hq * D]  (Qwen2; Llama attention_bias), else empty
  Tensor k_bias;      // self_attn.k_proj.bias  [Hkv * D]
  Tensor v_bias;      // self_attn.v_proj.bias  [Hkv * D]
  Tensor o_bias;      // self_attn.o_proj.bias  [H]       (Llama attention_bias only)
  Tensor post_norm;   // post_attention_layernorm.weight                   [H]
  Tensor gate_proj;   // mlp.gate_proj.weight                              [I, H]
  Tensor up_proj;     // mlp.up_proj.weight                                [I, H]
  Tensor down_proj;   // mlp.down_proj.weight                              [H, I]
  Tensor gate_bias;   // mlp.*.bias (Llama mlp_bias only), else empty      [I]
  Tensor up_bias;     //                                                   [I]
  Tensor down_bias;   //                                                   [H]
};

struct LlamaWeights {
  Tensor embed_tokens;  // model.embed_tokens.weight [V, H]
  std::vector<LlamaLayerWeights> layers;
  Tensor final_norm;  // model.norm.weight [H]
  Tensor lm_head;     // lm_head.weight [V, H]; the embedding itself when tie_word_embeddings

  // Takes every tensor the config calls for from `checkpoint`: a missing
  // tensor, a wrong shape or an unsupported dtype is an Error naming the tensor
  // (kNotFound / kCorruptData / kUnsupported). Tensors the config does not use
  // are ignored (e.g. rotary_emb.inv_freq of old checkpoints).
  static LlamaWeights load(const Checkpoint& checkpoint, const ModelConfig& config);
};

}  // namespace qserve
