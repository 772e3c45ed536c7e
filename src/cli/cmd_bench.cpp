// qserve bench throughput: the maximum achievable generation throughput of the
// engine (vLLM's benchmark_throughput protocol): N prompts of random token ids
// of --input-len, all submitted at once, each generating exactly --output-len
// tokens (EOS ignored), greedy. Reports generated tokens / wall time, prefill
// and decode rates, the peak batch, KV pages used, TTFT and TPOT percentiles.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <random>

#include "cli/app.h"
#include "core/error.h"
#include "qserve/engine.h"

namespace qserve::cli {
namespace {

struct ThroughputOptions {
  EngineConfig engine;
  int input_len = 1024;
  int output_len = 512;
  int num_prompts = 64;
  uint64_t seed = 0;
  bool json = false;
  bool sweep = false;
};

// Linear interpolation between closest ranks; v is sorted.
double percentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

nlohmann::json measure_throughput(const ThroughputOptions& o) {
  if (o.input_len < 1 || o.output_len < 1 || o.num_prompts < 1) {
    fail(ErrorCode::kInvalidArgument, "--input-len, --output-len and --num-prompts must be >= 1");
  }
  const auto load_start = std::chrono::steady_clock::now();
  auto engine = Engine::create(o.engine);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const ModelInfo& info = engine->model_info();

  // Random prompts (ids drawn away from the low, often special, ids).
  std::mt19937_64 rng(o.seed);
  const int lo = std::min(info.vocab_size - 1, 256);
  std::uniform_int_distribution<int32_t> token(lo, info.vocab_size - 1);
  std::vector<Request> requests(o.num_prompts);
  for (Request& r : requests) {
    r.prompt_token_ids.resize(o.input_len);
    for (int32_t& t : r.prompt_token_ids) t = token(rng);
    r.params.temperature = 0;
    r.params.max_tokens = o.output_len;
    r.params.ignore_eos = true;
    r.params.detokenize = false;
  }

  const EngineStats before = engine->stats();
  const std::clock_t cpu_start = std::clock();  // process CPU time, all threads
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<RequestStream>> streams = engine->submit_all(requests);
  std::vector<double> ttft, tpot, e2e;
  int64_t generated = 0;
  for (auto& s : streams) {
    while (auto out = s->next()) {
      generated += static_cast<int64_t>(out->token_ids.size());
      if (!out->finished) continue;
      if (out->finish_reason != FinishReason::kLength) {
        fail(ErrorCode::kInternal, "request {} ended with '{}' {}", out->request_id, finish_reason_name(out->finish_reason),
             out->error);
      }
      ttft.push_back(out->timings.ttft_s);
      e2e.push_back(out->timings.e2e_s);
      if (out->usage.completion_tokens > 1) tpot.push_back(out->timings.mean_tpot_s);
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_s = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const EngineStats s = engine->stats();
  std::sort(ttft.begin(), ttft.end());
  std::sort(tpot.begin(), tpot.end());
  std::sort(e2e.begin(), e2e.end());

  const double prefill_s = s.prefill_step_s - before.prefill_step_s;
  const double decode_s = s.decode_step_s - before.decode_step_s;
  const uint64_t prefill_tokens = s.prefill_tokens - before.prefill_tokens;
  const uint64_t decode_tokens = s.decode_tokens - before.decode_tokens;
  nlohmann::json j;
  j["bench"] = "throughput";
  j["model"] = info.name;
  j["device"] = info.device;
  j["precision"] = info.precision;
  j["input_len"] = o.input_len;
  j["output_len"] = o.output_len;
  j["num_prompts"] = o.num_prompts;
  j["max_num_seqs"] = o.engine.max_num_seqs;
  j["max_num_batched_tokens"] = o.engine.max_num_batched_tokens;
  j["page_size"] = s.page_size;
  j["load_s"] = load_s;
  j["wall_s"] = wall;
  j["output_tokens"] = generated;
  j["output_tokens_per_s"] = generated / wall;
  j["total_tokens_per_s"] = (static_cast<double>(o.input_len) * o.num_prompts + generated) / wall;
  j["requests_per_s"] = o.num_prompts / wall;
  // Prefill: tokens of prompts (and recompute) / model time of the steps that held any;
  // decode: tokens / model time of decode-only steps.
  j["prefill_tokens_per_s"] = prefill_s > 0 ? prefill_tokens / prefill_s : 0.0;
  j["decode_tokens_per_s"] = decode_s > 0 ? decode_tokens / decode_s : 0.0;
  j["peak_batch"] = s.peak_num_running;
  j["kv_pages_total"] = s.kv_pages_total;
  j["kv_pages_peak_used"] = s.peak_kv_pages_used;
  j["preemptions"] = s.num_preemptions - before.num_preemptions;
  j["steps"] = s.num_steps - before.num_steps;
  j["model_s"] = s.model_s - before.model_s;
  j["kv_zero_s"] = s.kv_zero_s - before.kv_zero_s;
  j["process_cpu_s"] = cpu_s;  // wall vs CPU time shows how much of the machine the run had
  j["ttft_ms_p50"] = percentile(ttft, 50) * 1e3;
  j["ttft_ms_p99"] = percentile(ttft, 99) * 1e3;
  j["tpot_ms_p50"] = percentile(tpot, 50) * 1e3;
  j["tpot_ms_p99"] = percentile(tpot, 99) * 1e3;
  j["e2e_ms_p50"] = percentile(e2e, 50) * 1e3;
  j["e2e_ms_p99"] = percentile(e2e, 99) * 1e3;
  return j;
}

void print_throughput(const nlohmann::json& j, bool json) {
  if (json) {
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    return;
  }
  auto d = [&](const char* k) { return j[k].get<double>(); };
  std::printf("model %s (%s, %s), %d prompts x (%d in, %d out), max_num_seqs %d\n",
              j["model"].get<std::string>().c_str(), j["device"].get<std::string>().c_str(),
              j["precision"].get<std::string>().c_str(), j["num_prompts"].get<int>(), j["input_len"].get<int>(),
              j["output_len"].get<int>(), j["max_num_seqs"].get<int>());
  std::printf("throughput: %.1f output tokens/s, %.1f total tokens/s, %.2f requests/s (%.2f s wall)\n",
              d("output_tokens_per_s"), d("total_tokens_per_s"), d("requests_per_s"), d("wall_s"));
  std::printf("prefill %.1f tokens/s, decode %.1f tokens/s; peak batch %d, KV pages %lld of %lld peak, %lld preemptions\n",
              d("prefill_tokens_per_s"), d("decode_tokens_per_s"), j["peak_batch"].get<int>(),
              j["kv_pages_peak_used"].get<long long>(), j["kv_pages_total"].get<long long>(),
              j["preemptions"].get<long long>());
  std::printf("model time %.2f s (KV page zeroing %.2f ms), process CPU time %.2f s\n", d("model_s"),
              d("kv_zero_s") * 1e3, d("process_cpu_s"));
  std::printf("TTFT p50 %.1f ms p99 %.1f ms; TPOT p50 %.2f ms p99 %.2f ms\n", d("ttft_ms_p50"), d("ttft_ms_p99"),
              d("tpot_ms_p50"), d("tpot_ms_p99"));
  std::fflush(stdout);
}

// Sweep: max_num_seqs = 1, 2, 4, ... up to --max-num-seqs (and the number of
// prompts); reports each point, then the batch size of maximum throughput.
int run_throughput(const ThroughputOptions& o) {
  if (!o.sweep) {
    print_throughput(measure_throughput(o), o.json);
    return 0;
  }
  const int cap = std::min(o.engine.max_num_seqs, o.num_prompts);
  nlohmann::json best;
  for (int seqs = 1;; seqs = std::min(seqs * 2, cap)) {
    ThroughputOptions point = o;
    point.engine.max_num_seqs = seqs;
    const nlohmann::json j = measure_throughput(point);
    print_throughput(j, o.json);
    if (best.is_null() || j["output_tokens_per_s"].get<double>() > best["output_tokens_per_s"].get<double>()) best = j;
    if (seqs == cap) break;
  }
  nlohmann::json summary = {{"bench", "throughput_sweep"},
                            {"best_max_num_seqs", best["max_num_seqs"]},
                            {"output_tokens_per_s", best["output_tokens_per_s"]},
                            {"peak_batch", best["peak_batch"]}};
  if (o.json) {
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf("sweep: best max_num_seqs %d: %.1f output tokens/s\n", best["max_num_seqs"].get<int>(),
                best["output_tokens_per_s"].get<double>());
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks of the serving engine");
  bench->require_subcommand(1);
  auto o = std::make_shared<ThroughputOptions>();
  auto* tp = bench->add_subcommand("throughput", "Maximum generation throughput: all prompts at once, EOS ignored");
  EngineConfig& e = o->engine;
  tp->add_option("--model", e.model, "Model directory or .gguf file (default: the default model)")
      ->envname("QSERVE_MODEL");
  tp->add_option("--device", e.device, "cpu | cuda")->capture_default_str()->envname("QSERVE_DEVICE");
  tp->add_option("--precision", e.precision, "fp16 | w8a8kv8 | w4a16 | w4a8kv8 | w4a8kv4 (CPU: fp16 = FP32 reference)")
      ->capture_default_str();
  tp->add_option("--load-format", e.load_format, "auto | dummy (random weights of --arch)")->capture_default_str();
  tp->add_option("--arch", e.arch, "Shape for dummy weights: llama-2-7b, llama-3-8b, llama-2-13b, llama-2-70b");
  tp->add_option("--input-len", o->input_len, "Prompt tokens per request")->capture_default_str();
  tp->add_option("--output-len", o->output_len, "Generated tokens per request")->capture_default_str();
  tp->add_option("--num-prompts", o->num_prompts, "Requests")->capture_default_str();
  tp->add_option("--max-num-seqs", e.max_num_seqs, "Batch size limit")->capture_default_str()->envname("QSERVE_MAX_NUM_SEQS");
  tp->add_option("--max-num-batched-tokens", e.max_num_batched_tokens, "Tokens per step")->capture_default_str();
  tp->add_option("--max-model-len", e.max_model_len, "Context length (0: the model's)")->capture_default_str();
  tp->add_option("--page-size", e.page_size, "Tokens per KV page")->capture_default_str();
  tp->add_option("--num-kv-pages", e.num_kv_pages, "KV pages (0: from --kv-cache-bytes)")->capture_default_str();
  tp->add_option("--kv-cache-bytes", e.kv_cache_bytes, "KV cache budget in bytes (0: the backend's default)")
      ->capture_default_str();
  tp->add_option("--memory-budget", e.memory_budget, "CUDA: emulate a card of this many bytes")->capture_default_str();
  tp->add_option("--gpu-memory-utilization", e.gpu_memory_utilization, "CUDA: fraction of device memory")
      ->capture_default_str();
  tp->add_option("--seed", o->seed, "Seed of the random prompts")->capture_default_str();
  tp->add_flag("--json", o->json, "One JSON line on stdout (per sweep point)");
  tp->add_flag("--sweep", o->sweep, "Run max_num_seqs = 1, 2, 4, ... up to --max-num-seqs; report the best");
  set_command_body(bench, [o, tp]() -> int {
    if (tp->parsed()) return run_throughput(*o);
    return 2;
  });
}

}  // namespace qserve::cli
