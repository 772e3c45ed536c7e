// Prefill and decode tokens/s of the CPU FP32 forward pass (a benchmark, not a test).
//
//   build/bench/qserve_bench_forward [MODEL] [--prompt N] [--decode N] [--batch B] [--scalar] [--threads N]
//
// MODEL: a model directory or .gguf file; default: the default model
// (${QSERVE_HOME:-~/.cache/qserve}/models/SmolLM2-135M-Instruct). Prompts are
// random token ids (speed does not depend on them). Prefill: B sequences of N
// tokens in one call; decode: B sequences, one token each per call.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "backend/cpu/matmul.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/llama_model.h"
#include "model/checkpoint.h"

using namespace qserve;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string default_model() {
  const char* home = std::getenv("QSERVE_HOME");
  const char* user_home = std::getenv("HOME");
  return std::string(home ? home : std::string(user_home ? user_home : ".") + "/.cache/qserve") + "/models/SmolLM2-135M-Instruct";
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path = default_model();
  int prompt = 128, decode = 64, batch = 1;
  bool scalar = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> int {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", a);
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (a == "--prompt") prompt = next();
    else if (a == "--decode") decode = next();
    else if (a == "--batch") batch = next();
    else if (a == "--scalar") scalar = true;
    else if (a == "--threads") setenv("QSERVE_NUM_THREADS", std::to_string(next()).c_str(), 1);
    else if (a == "--help" || a == "-h") {
      fmt::print("usage: {} [MODEL] [--prompt N] [--decode N] [--batch B] [--scalar] [--threads N]\n", argv[0]);
      return 0;
    } else model_path = a;
  }
  if (prompt < 1 || decode < 0 || batch < 1) {
    fmt::print(stderr, "--prompt and --batch must be >= 1, --decode >= 0\n");
    return 2;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    auto ckpt = open_checkpoint(model_path);
    const ModelConfig config = ModelConfig::from_json(ckpt->config());
    auto model = LlamaModel::create(config, LlamaWeights::load(*ckpt, config), make_cpu_backend(!scalar));
    const double load_s = seconds_since(t0);
    fmt::print("model {}\n  {}\n  backend {}; loaded in {:.2f} s\n", model_path, config.summary(), model->backend().name(), load_s);

    std::mt19937 rng(1);
    Batch pre;
    for (int s = 0; s < batch; ++s) {
      std::vector<int32_t> ids(prompt);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % config.vocab_size);
      pre.seqs.push_back({s, ids, 0});
    }
    Logits logits;
    {  // warm-up: page pool, workspace, first touch of the weights
      Batch warm;
      warm.seqs.push_back({1000, {1, 2, 3, 4}, 0});
      model->forward(warm, logits);
      model->release(1000);
    }
    t0 = std::chrono::steady_clock::now();
    model->forward(pre, logits);
    const double prefill_s = seconds_since(t0);
    fmt::print("prefill: {} x {} tokens in {:.3f} s = {:.1f} tokens/s\n", batch, prompt, prefill_s, batch * prompt / prefill_s);

    if (decode > 0) {
      t0 = std::chrono::steady_clock::now();
      for (int step = 0; step < decode; ++step) {
        Batch d;
        for (int s = 0; s < batch; ++s) {
          const auto row = logits.row(s);
          const int32_t next = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
          d.seqs.push_back({s, {next}, prompt + step});
        }
        model->forward(d, logits);
      }
      const double decode_s = seconds_since(t0);
      fmt::print("decode: {} x {} tokens in {:.3f} s = {:.1f} tokens/s ({:.1f} ms per step, context {} -> {})\n", batch, decode,
                 decode_s, batch * decode / decode_s, 1e3 * decode_s / decode, prompt, prompt + decode);
    }
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
