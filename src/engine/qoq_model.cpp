#include "engine/qoq_model.h"

#include "core/error.h"
#include "engine/backend_factory.h"
#include "quant/qoq_checkpoint.h"
#include "quant/quantizer.h"

namespace qserve {
namespace {

Tensor f32_vector(const std::vector<float>& v) {
  Tensor t = Tensor::zeros(DType::kF32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}

const Tensor& expect_2d(const Checkpoint& c, const std::string& name, int64_t rows, int64_t cols) {
  const Tensor& t = c.get(name);
  if (t.rank() != 2 || t.dim(0) != rows || t.dim(1) != cols)
    fail(ErrorCode::kCorruptData, "{}: tensor '{}' is {}, expected [{}, {}]", c.path(), name, t.describe(), rows, cols);
  return t;
}

}  // namespace

std::unique_ptr<LlamaModel> load_qoq_model(const Checkpoint& ckpt, LlamaModelOptions options) {
  const nlohmann::json& cj = ckpt.config();
  const quant::QoqConfig qc = quant::qoq_config_from_json(cj["quantization_config"]);
  const ModelConfig config = ModelConfig::from_json(cj);
  if (config.attention_bias || config.mlp_bias || config.o_proj_bias)
    fail(ErrorCode::kUnsupported, "{}: quantized checkpoints with linear biases are not supported", ckpt.path());
  const quant::LlamaShape shape = quant::llama_shape_from_config(cj);

  auto blocks = std::make_shared<std::vector<quant::QuantizedBlock>>();
  LlamaWeights w;
  w.embed_tokens = expect_2d(ckpt, "model.embed_tokens.weight", config.vocab_size, config.hidden_size);
  w.lm_head = ckpt.has("lm_head.weight") ? expect_2d(ckpt, "lm_head.weight", config.vocab_size, config.hidden_size)
                                         : w.embed_tokens;
  if (!ckpt.has("lm_head.weight") && !config.tie_word_embeddings)
    fail(ErrorCode::kCorruptData, "{}: untied model without lm_head.weight", ckpt.path());
  const Tensor& fn = ckpt.get("model.norm.weight");
  if (fn.rank() != 1 || fn.dim(0) != config.hidden_size)
    fail(ErrorCode::kCorruptData, "{}: tensor 'model.norm.weight' is {}, expected [{}]", ckpt.path(), fn.describe(),
         config.hidden_size);
  w.final_norm = fn;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    blocks->push_back(quant::load_quantized_block(ckpt, qc, shape, l));
    LlamaLayerWeights lw;
    lw.input_norm = f32_vector(blocks->back().attn_norm);
    lw.post_norm = f32_vector(blocks->back().mlp_norm);
    w.layers.push_back(std::move(lw));
  }

  const int kv = quant::kv_bits(qc.precision);
  std::optional<KvDtype> kv_dtype;
  if (kv == 4 || kv == 8) kv_dtype = kv == 4 ? KvDtype::kInt4 : KvDtype::kInt8;
  std::unique_ptr<Backend> backend = make_backend(options.device, kv_dtype);

  auto source = [blocks](int64_t l, const std::string& module) -> quant::QuantizedLinear {
    quant::QuantizedBlock& blk = (*blocks)[l];
    quant::QuantizedLinear* q = module == "q_proj"      ? &blk.q
                                : module == "k_proj"    ? &blk.k
                                : module == "v_proj"    ? &blk.v
                                : module == "o_proj"    ? &blk.o
                                : module == "gate_proj" ? &blk.gate
                                : module == "up_proj"   ? &blk.up
                                                        : &blk.down;
    QS_CHECK(module == "down_proj" || q != &blk.down) << "unknown module " << module;
    return std::move(*q);  // handed over once: the block keeps no copy
  };
  return LlamaModel::create(config, w, std::move(backend), options, source);
}

}  // namespace qserve
