// qserve generate [--model DIR|FILE.gguf] --prompt TEXT [--chat [--system TEXT]] [--max-tokens N] [--temperature T]
//                 [--top-p P] [--top-k K] [--min-p P] [--repetition-penalty R] [--seed S] [--stop STR]...
// Streams the generated text to stdout as it is made (through the engine, the
// same path the server uses) and prints prefill / decode speed to stderr.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/engine_flags.h"
#include "core/error.h"
#include "qserve/engine.h"
#include "tokenizer/chat_template.h"

namespace qserve::cli {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  int max_tokens = 128;
  float temperature = 0.7f;
  float top_p = 0.9f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  int64_t seed = -1;
  std::vector<std::string> stop;
  std::vector<int> stop_token_ids;
  bool ignore_eos = false;
  int threads = 0;
  bool chat = false;
  std::string system;
  std::string device = "cpu";
  EngineConfig model_flags;  // --precision, --load-format, --arch, --memory-budget, --gpu-memory-utilization
};

// The prompt as one user turn (after an optional system turn) in the model's own
// chat template, ending with the assistant's turn opener.
std::string apply_chat(const Engine& engine, const GenerateOptions& o) {
  const ModelInfo& info = engine.model_info();
  if (info.chat_template.empty()) fail(ErrorCode::kInvalidArgument, "--chat: the model has no chat template");
  ChatTemplate tmpl(info.chat_template, {{"bos_token", info.bos_token}, {"eos_token", info.eos_token}});
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  messages.push_back({{"role", "user"}, {"content", o.prompt}});
  return tmpl.render(messages, /*add_generation_prompt=*/true);
}

int run_generate(const GenerateOptions& o) {
  EngineConfig config;
  config.model = o.model;
  config.num_threads = o.threads;
  config.max_num_seqs = 1;
  config.device = o.device;
  copy_model_flags(o.model_flags, config);
  auto engine = Engine::create(config);

  Request request;
  if (o.chat) {
    request.prompt = apply_chat(*engine, o);
    request.add_special_tokens = false;  // the template writes its own special tokens
  } else {
    request.prompt = o.prompt;
  }
  GenerationParams& p = request.params;
  p.max_tokens = o.max_tokens;
  p.temperature = o.temperature;
  p.top_p = o.top_p;
  p.top_k = o.top_k;
  p.min_p = o.min_p;
  p.repetition_penalty = o.repetition_penalty;
  if (o.seed >= 0) p.seed = static_cast<uint64_t>(o.seed);
  p.stop = o.stop;
  p.stop_token_ids.assign(o.stop_token_ids.begin(), o.stop_token_ids.end());
  p.ignore_eos = o.ignore_eos;

  auto stream = engine->submit(request);  // throws on a bad request (e.g. prompt beyond the context)
  RequestOutput last;
  while (auto out = stream->next()) {
    if (!out->text.empty()) {
      std::fwrite(out->text.data(), 1, out->text.size(), stdout);
      std::fflush(stdout);
    }
    if (out->finished) last = *out;
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (last.finish_reason == FinishReason::kError) fail(ErrorCode::kInternal, "generation failed: {}", last.error);

  const RequestTimings& t = last.timings;
  const int n_prompt = last.usage.prompt_tokens;
  const int n_gen = last.usage.completion_tokens;
  const double prefill_tps = t.ttft_s > 0 ? n_prompt / t.ttft_s : 0.0;
  const double decode_s = t.e2e_s - t.ttft_s;
  const double decode_tps = (n_gen > 1 && decode_s > 0) ? (n_gen - 1) / decode_s : 0.0;
  std::fprintf(stderr,
               "[qserve] prompt %d tokens, prefill %.1f tok/s | generated %d tokens, decode %.1f tok/s | "
               "finish: %s | %s on %s\n",
               n_prompt, prefill_tps, n_gen, decode_tps, finish_reason_name(last.finish_reason),
               engine->model_info().name.c_str(), engine->model_info().device.c_str());
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto* sub = app.add_subcommand("generate", "Generate text from a prompt, streamed to stdout");
  auto o = std::make_shared<GenerateOptions>();
  sub->add_option("--model", o->model, "Model directory or .gguf file (default: the installed default model)")
      ->envname("QSERVE_MODEL");
  sub->add_option("--prompt", o->prompt, "Prompt text")->required();
  sub->add_flag("--chat", o->chat, "Send the prompt as a user message through the model's chat template");
  sub->add_option("--system", o->system, "System message (with --chat)");
  sub->add_option("--max-tokens", o->max_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--temperature", o->temperature, "Sampling temperature (0: greedy)")
      ->check(CLI::Range(0.0f, 100.0f))->capture_default_str();
  sub->add_option("--top-p", o->top_p, "Nucleus sampling mass, in (0, 1]")->check(CLI::Range(1e-6f, 1.0f))
      ->capture_default_str();
  sub->add_option("--top-k", o->top_k, "Keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--min-p", o->min_p, "Drop tokens below min_p x the top probability (0: off)")
      ->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
  sub->add_option("--repetition-penalty", o->repetition_penalty, "Repetition penalty (1: off)")
      ->check(CLI::Range(0.01f, 100.0f))->capture_default_str();
  sub->add_option("--seed", o->seed, "Random seed (same seed, same text); -1: random")->capture_default_str();
  sub->add_option("--stop", o->stop, "Stop string (repeatable)");
  sub->add_option("--stop-token-id", o->stop_token_ids, "Stop token id (repeatable)");
  sub->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-sequence");
  sub->add_option("--device", o->device, "cpu or cuda")->capture_default_str()->envname("QSERVE_DEVICE");
  add_model_flags(sub, o->model_flags);
  sub->add_option("--threads", o->threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber)
      ->envname("QSERVE_NUM_THREADS");
  set_command_body(sub, [o]() { return run_generate(*o); });
}

}  // namespace qserve::cli
