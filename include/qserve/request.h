// A generation request and the outputs streamed back for it: the public,
// HTTP-free vocabulary shared by the engine, the CLI and the server.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace qserve {

// How the next token is chosen and when generation stops. Field for field the
// sampler's SamplingParams (src/engine/sampler.h) plus the stop conditions
// (src/engine/stop_checker.h); the engine converts, the caller never sees those.
struct GenerationParams {
  // Sampling. temperature 0 = greedy (argmax, ties to the lowest id).
  float temperature = 1.0f;          // >= 0
  int top_k = 0;                     // <= 0: off
  float top_p = 1.0f;                // (0, 1]; 1: off
  float min_p = 0.0f;                // [0, 1]; 0: off
  float repetition_penalty = 1.0f;   // > 0; 1: off (CTRL-style, over prompt + output)
  std::optional<uint64_t> seed;      // per-request RNG seed; unset: engine-chosen

  // Stop conditions.
  int max_tokens = -1;                    // generated tokens; < 0: up to the context length
  int min_tokens = 0;                     // EOS / stop ids are ignored before this many
  std::vector<int32_t> stop_token_ids;    // in addition to the model's EOS ids
  std::vector<std::string> stop;          // stop strings, matched on the detokenized output
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;                // keep going past EOS (benchmarks)

  // Output options.
  int logprobs = -1;                      // < 0: none; N >= 0: sampled token's logprob + top N
  bool detokenize = true;                 // produce RequestOutput::text
  bool skip_special_tokens = true;        // in the detokenized text
};

// A request: text or token ids (token ids win when both are given).
struct Request {
  std::string prompt;                     // raw text (a chat template is already applied)
  std::vector<int32_t> prompt_token_ids;  // pre-tokenized prompt
  bool add_special_tokens = true;         // BOS when encoding `prompt` (if the model wants one)
  GenerationParams params;
};

enum class FinishReason {
  kNone,       // not finished (an intermediate output)
  kStop,       // EOS, a stop token id or a stop string
  kLength,     // max_tokens reached, or the context length
  kCancelled,  // cancel() / Engine::cancel, or engine shutdown
  kError,      // the engine failed on this request (message in RequestOutput::error)
};
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "cancelled", "error"

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;  // log-softmax of the raw logits (before temperature / penalties)
};
// One entry per generated token when GenerationParams::logprobs >= 0.
struct GeneratedTokenLogprobs {
  int32_t token_id = 0;             // the sampled token
  float logprob = 0.0f;             // its logprob
  std::vector<TokenLogprob> top;    // the top-N, highest first (N = params.logprobs)
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;  // generated so far (cumulative)
};

// Latencies of one request, seconds; filled in the final output.
struct RequestTimings {
  double queue_s = 0;      // arrival -> first scheduled
  double ttft_s = 0;       // arrival -> first generated token
  double e2e_s = 0;        // arrival -> finished
  double mean_tpot_s = 0;  // (e2e - ttft) / (completion_tokens - 1); 0 if < 2 tokens
};

// An increment of one request's output. Outputs of a request arrive in order;
// exactly one has finished == true and it is the last.
struct RequestOutput {
  uint64_t request_id = 0;
  std::vector<int32_t> token_ids;   // new tokens since the previous output
  std::string text;                 // new text since the previous output (UTF-8, never a
                                    // split code point; held back while a stop string may match)
  std::vector<GeneratedTokenLogprobs> logprobs;  // parallel to token_ids when requested
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_reason;          // the matched stop string, or the stop token id as text
  std::string error;                // when finish_reason == kError
  Usage usage;                      // cumulative
  RequestTimings timings;           // when finished
};

// Called on the engine's thread for each output of a request. Must be quick and
// must not block on the engine (submitting or cancelling from it is allowed).
using OutputCallback = std::function<void(const RequestOutput&)>;

}  // namespace qserve
