// Decode-step timing of the CUDA backend on Llama-3-8B-shaped layers (perf
// mode, not run by default: --gtest_also_run_disabled_tests
// --gtest_filter='*CudaModelPerf*'). Two decoder layers of the 8B shape
// (hidden 4096, MLP 14336, 32 / 8 heads of 128) with Llama-2's 32k
// vocabulary, weights from a cheap hash (their values do not change the
// time), every sequence at position 1023 over a KV cache of 1024 tokens
// (the pages are allocated, not prefilled: the kernels read the same bytes).
// Prints milliseconds per step per batch size, with the logits download and
// with device sampling.
#ifdef QSERVE_HAVE_CUDA
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cuda_runtime.h>

#include "core/half.h"
#include "core/thread_pool.h"
#include "engine/backend_factory.h"
#include "engine/llama_model.h"
#include "quant/precision.h"
#include "quant/quant_linear.h"

namespace qserve {
namespace {

Tensor hashed(std::vector<int64_t> shape, float scale, uint64_t salt) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape));
  float* p = t.data_as<float>();
  ThreadPool::global().parallel_for(t.numel(), [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      uint64_t x = (static_cast<uint64_t>(i) + salt) * 0x9e3779b97f4a7c15ull;
      x ^= x >> 29;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 32;
      p[i] = round_to_half((static_cast<float>(x & 0xffff) / 65536.f - 0.5f) * scale);
    }
  });
  return t;
}

TEST(CudaModelPerf, DISABLED_DecodeStepLlama3Shape) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "skipped: no CUDA device";
  ModelConfig c;
  c.vocab_size = 32000;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 2;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 8192;
  LlamaWeights w;
  uint64_t salt = 1;
  const float s = 2.0f / 64.0f;
  w.embed_tokens = hashed({c.vocab_size, c.hidden_size}, 2.f, salt++);
  w.lm_head = hashed({c.vocab_size, c.hidden_size}, s, salt++);
  w.final_norm = hashed({c.hidden_size}, 0.1f, salt++);
  for (float& v : w.final_norm.span<float>()) v += 1.f;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LlamaLayerWeights L;
    L.input_norm = w.final_norm;
    L.post_norm = w.final_norm;
    L.q_proj = hashed({c.q_dim(), c.hidden_size}, s, salt++);
    L.k_proj = hashed({c.kv_dim(), c.hidden_size}, s, salt++);
    L.v_proj = hashed({c.kv_dim(), c.hidden_size}, s, salt++);
    L.o_proj = hashed({c.hidden_size, c.q_dim()}, s, salt++);
    L.gate_proj = hashed({c.intermediate_size, c.hidden_size}, s, salt++);
    L.up_proj = hashed({c.intermediate_size, c.hidden_size}, s, salt++);
    L.down_proj = hashed({c.hidden_size, c.intermediate_size}, s / 2, salt++);
    w.layers.push_back(std::move(L));
  }
  constexpr int64_t kContext = 1024, kPage = 16;
  for (const char* precision : {"fp16", "w4a8kv4_g128", "fp16+graphs", "w4a8kv4_g128+graphs"}) {
    const std::string p = precision;
    LlamaModelOptions options;
    options.cuda_graphs = p.ends_with("+graphs");  // the default is on: the plain rows run op by op
    std::unique_ptr<LlamaModel> model;
    if (p.starts_with("fp16")) {
      model = LlamaModel::create(c, w, make_backend("cuda"), options);
    } else {
      const quant::WeightFormat f = p.starts_with("w4a8kv4_g128") ? quant::WeightFormat::kW4G128 : quant::WeightFormat::kW4PerChannel;
      auto factory = [&](int64_t l, const std::string& module) {
        const LlamaLayerWeights& L = w.layers[l];
        const Tensor& t = module == "q_proj"      ? L.q_proj
                          : module == "k_proj"    ? L.k_proj
                          : module == "v_proj"    ? L.v_proj
                          : module == "o_proj"    ? L.o_proj
                          : module == "gate_proj" ? L.gate_proj
                          : module == "up_proj"   ? L.up_proj
                                                  : L.down_proj;
        quant::Matrix m(t.dim(0), t.dim(1));
        std::copy(t.data_as<float>(), t.data_as<float>() + t.numel(), m.data.begin());
        return quant::quantize_linear(f, m, 128);
      };
      model = LlamaModel::create(c, w, make_backend("cuda", KvDtype::kInt4), options, factory);
    }
    const int64_t max_batch = 256, pages_per_seq = kContext / kPage;
    model->allocate_kv_cache(max_batch * pages_per_seq, kPage);
    std::vector<int32_t> table(max_batch * pages_per_seq);
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    std::vector<int32_t> token(1, 7);
    for (int64_t batch : {1, 64, 256}) {
      PagedBatch b;
      for (int64_t s = 0; s < batch; ++s)
        b.seqs.push_back({token, kContext - 1, std::span<const int32_t>(table).subspan(s * pages_per_seq, pages_per_seq), true});
      Logits out;
      for (int i = 0; i < 3; ++i) model->forward_paged(b, out);  // warm-up, library plans, graph capture
      constexpr int kSteps = 10;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kSteps; ++i) model->forward_paged(b, out);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kSteps;
      ASSERT_EQ(out.last.size(), static_cast<size_t>(batch * c.vocab_size));
      // The same step sampled on the device (greedy): only token ids come back.
      const std::vector<SamplingParams> params(batch);
      const std::vector<uint64_t> steps(batch, 0);
      std::vector<int32_t> tokens;
      model->forward_paged_sampled(b, params, steps, tokens);
      const auto t1 = std::chrono::steady_clock::now();
      for (int i = 0; i < kSteps; ++i) model->forward_paged_sampled(b, params, steps, tokens);
      const double ms_sampled =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count() / kSteps;
      std::printf("  perf %-20s batch %3lld context %lld: %.3f ms per decode step with logits download, %.3f ms with "
                  "device sampling (2 layers + lm_head, vocab 32000)\n",
                  precision, static_cast<long long>(batch), static_cast<long long>(kContext), ms, ms_sampled);
      ASSERT_EQ(tokens.size(), static_cast<size_t>(batch));
    }
  }
}

}  // namespace
}  // namespace qserve
#endif  // QSERVE_HAVE_CUDA
