// qserve bench throughput: the maximum achievable generation throughput of the
// engine (vLLM's benchmark_throughput protocol): N prompts of random token ids
// of --input-len, all submitted at once, each generating exactly --output-len
// tokens (EOS ignored), greedy. Reports generated tokens / wall time, prefill
// and decode rates, the peak batch, KV pages used, TTFT and TPOT percentiles,
// and the memory plan (docs/serving-benchmark.md). The model is loaded once;
// a sweep runs one engine per batch size on it, with the same KV cache, and
// --ab-plans / --ab-switch run everything once per A / B pass on it (W4A8
// plans or kernel forms switched).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <tuple>
#include <random>

#include "cli/cmd_bench.h"
#include "core/error.h"
#include "engine/backend_factory.h"
#include "engine/engine_create.h"
#include "engine/model_runner.h"

namespace qserve::cli {
namespace {

constexpr int kMaxAutoSeqs = 4096;  // --max-num-seqs 0 with --num-prompts 0: the KV cache sizing's batch bound

// A runner that forwards to a model owned by the benchmark, so that several
// engines (one per sweep point) run on one loaded model.
class BorrowedRunner final : public ModelRunner {
 public:
  explicit BorrowedRunner(ModelRunner& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  std::string architecture() const override { return inner_.architecture(); }
  int vocab_size() const override { return inner_.vocab_size(); }
  int max_model_len() const override { return inner_.max_model_len(); }
  int64_t kv_bytes_per_page(int page_size) const override { return inner_.kv_bytes_per_page(page_size); }
  void allocate_kv_cache(int64_t num_pages, int page_size) override { inner_.allocate_kv_cache(num_pages, page_size); }
  std::span<const float> execute(const RunnerBatch& batch) override { return inner_.execute(batch); }
  bool can_sample_on_device() const override { return inner_.can_sample_on_device(); }
  std::span<const int32_t> execute_and_sample(const RunnerBatch& batch, std::span<const SamplingParams> params,
                                              std::span<const uint64_t> steps) override {
    return inner_.execute_and_sample(batch, params, steps);
  }
  std::vector<int32_t> eos_token_ids() const override { return inner_.eos_token_ids(); }
  double kv_zero_seconds() const override { return inner_.kv_zero_seconds(); }
  StepTiming step_timing() const override { return inner_.step_timing(); }

 private:
  ModelRunner& inner_;
};

// Linear interpolation between closest ranks; v is sorted.
double percentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Under QSERVE_STEP_TIMING=1 on a device backend: this run's steps (those
// after `before`), the device's time from each step's first upload to its
// last copy back and its idle time between steps (the host's part it did not
// overlap), as medians (the first step's warm-up and any prefill step do not
// move them), the busy time's tail (p90, p99, max: a few slow steps move the
// rate but not the median) and totals. With StepTiming::series
// (QSERVE_STEP_TIMING=steps) both series in step order too (idle[i] is the
// gap before busy[i + 1]).
void put_step_timing(const StepTiming& before, const StepTiming& after, nlohmann::json& j) {
  if (after.busy_us.size() <= before.busy_us.size()) return;
  auto slice = [](const std::vector<float>& v, size_t from) {
    return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(std::min(from, v.size())), v.end());
  };
  auto sorted = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v; };
  const std::vector<double> busy_steps = slice(after.busy_us, before.busy_us.size());
  const std::vector<double> idle_steps = slice(after.idle_us, before.idle_us.size());
  const std::vector<double> busy = sorted(busy_steps), idle = sorted(idle_steps);
  auto sum = [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x; return s; };
  j["timed_steps"] = busy.size();
  j["device_busy_us_p50"] = busy[busy.size() / 2];
  j["device_busy_us_p90"] = percentile(busy, 90);
  j["device_busy_us_p99"] = percentile(busy, 99);
  j["device_busy_us_max"] = busy.back();
  j["device_idle_us_p50"] = idle.empty() ? 0.0 : idle[idle.size() / 2];
  j["device_idle_us_max"] = idle.empty() ? 0.0 : idle.back();
  j["device_busy_s"] = sum(busy) * 1e-6;
  j["device_idle_s"] = sum(idle) * 1e-6;
  if (after.series) {
    auto rounded = [](const std::vector<double>& v) {
      std::vector<double> r;
      r.reserve(v.size());
      for (double x : v) r.push_back(std::round(x * 10.0) / 10.0);
      return r;
    };
    j["device_busy_us_steps"] = rounded(busy_steps);
    j["device_idle_us_steps"] = rounded(idle_steps);
  }
}

// The memory plan of a run's line: the (emulated) card, its budget, what the
// weights and runtime hold, the workspace reserve, the KV pages it leaves.
void put_memory_plan(const KvCachePlan& plan, nlohmann::json& j) {
  j["memory_budget"] = plan.card_bytes;
  j["kv_source"] = plan.source;
  j["budget_bytes"] = plan.budget_bytes;
  j["used_bytes"] = plan.used_bytes;
  j["reserve_bytes"] = plan.reserve_bytes;
  j["kv_bytes_per_page"] = plan.kv_bytes_per_page;
  j["kv_budget_pages"] = plan.budget_pages;
}

// One benchmark run of `num_seqs` max_num_seqs on the loaded model.
nlohmann::json measure(const ThroughputOptions& o, LoadedModel& m, const KvCachePlan& plan, int num_seqs, int num_prompts,
                       int64_t max_batch_fits) {
  EngineConfig config = m.config;
  config.max_num_seqs = num_seqs;
  config.num_kv_pages = plan.num_pages;
  auto engine = Engine::create(config, std::make_unique<BorrowedRunner>(*m.runner), m.codec);
  const ModelInfo& info = engine->model_info();
  if (o.input_len + o.output_len > info.max_model_len)
    fail(ErrorCode::kOutOfRange, "--input-len {} + --output-len {} exceed the context of {} tokens", o.input_len,
         o.output_len, info.max_model_len);

  // Random prompts (ids drawn away from the low, often special, ids).
  std::mt19937_64 rng(o.seed);
  const int lo = std::min(info.vocab_size - 1, 256);
  std::uniform_int_distribution<int32_t> token(lo, info.vocab_size - 1);
  std::vector<Request> requests(num_prompts);
  for (Request& r : requests) {
    r.prompt_token_ids.resize(o.input_len);
    for (int32_t& t : r.prompt_token_ids) t = token(rng);
    r.params.temperature = 0;
    r.params.max_tokens = o.output_len;
    r.params.ignore_eos = true;
    r.params.detokenize = false;
  }

  const EngineStats before = engine->stats();
  const double zero_before = m.runner->kv_zero_seconds();
  const StepTiming timing_before = m.runner->step_timing();
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
  if (!o.side.empty()) j["v"] = o.side;  // an A/B (--ab-plans / --ab-switch): this run's side, first (bench/ab_compare.py engine)
  j["bench"] = "throughput";
  j["model"] = info.name;
  j["arch"] = m.config.load_format == "dummy" ? m.config.arch : info.name;
  j["load_format"] = m.config.load_format;
  j["device"] = info.device;
  j["precision"] = info.precision;
  j["input_len"] = o.input_len;
  j["output_len"] = o.output_len;
  j["num_prompts"] = num_prompts;
  j["max_num_seqs"] = num_seqs;
  j["max_batch_fits"] = max_batch_fits;  // sequences of input + output tokens the budget's KV pages hold
  j["max_num_batched_tokens"] = config.max_num_batched_tokens;
  j["page_size"] = s.page_size;
  j["gpu_memory_utilization"] = config.gpu_memory_utilization;
  j["weight_bytes"] = m.weight_bytes;
  put_memory_plan(plan, j);
  j["load_s"] = m.load_s;
  j["wall_s"] = wall;
  j["output_tokens"] = generated;
  j["output_tokens_per_s"] = generated / wall;
  j["total_tokens_per_s"] = (static_cast<double>(o.input_len) * num_prompts + generated) / wall;
  j["requests_per_s"] = num_prompts / wall;
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
  j["kv_zero_s"] = m.runner->kv_zero_seconds() - zero_before;
  j["process_cpu_s"] = cpu_s;  // wall vs CPU time shows how much of the machine the run had
  put_step_timing(timing_before, m.runner->step_timing(), j);
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
  auto gib = [&](const char* k) { return static_cast<double>(j[k].get<int64_t>()) / (1 << 30); };
  std::printf("model %s (%s, %s), %d prompts x (%d in, %d out), max_num_seqs %d\n",
              j["model"].get<std::string>().c_str(), j["device"].get<std::string>().c_str(),
              j["precision"].get<std::string>().c_str(), j["num_prompts"].get<int>(), j["input_len"].get<int>(),
              j["output_len"].get<int>(), j["max_num_seqs"].get<int>());
  std::printf("memory: %s; weights %.2f GiB; KV %lld pages of %.2f MiB (budget holds %lld)\n",
              j["memory_budget"].get<int64_t>() > 0
                  ? fmt::format("card {:.2f} GiB x {:.2f} = {:.2f} GiB", gib("memory_budget"), d("gpu_memory_utilization"),
                                gib("budget_bytes")).c_str()
                  : j["kv_source"].get<std::string>().c_str(),
              gib("weight_bytes"), j["kv_pages_total"].get<long long>(), d("kv_bytes_per_page") / (1 << 20),
              j["kv_budget_pages"].get<long long>());
  std::printf("throughput: %.1f output tokens/s, %.1f total tokens/s, %.2f requests/s (%.2f s wall)\n",
              d("output_tokens_per_s"), d("total_tokens_per_s"), d("requests_per_s"), d("wall_s"));
  std::printf("prefill %.1f tokens/s, decode %.1f tokens/s; peak batch %d, KV pages %lld of %lld peak, %lld preemptions\n",
              d("prefill_tokens_per_s"), d("decode_tokens_per_s"), j["peak_batch"].get<int>(),
              j["kv_pages_peak_used"].get<long long>(), j["kv_pages_total"].get<long long>(),
              j["preemptions"].get<long long>());
  std::printf("model time %.2f s (KV page zeroing %.2f ms), process CPU time %.2f s, load %.2f s\n", d("model_s"),
              d("kv_zero_s") * 1e3, d("process_cpu_s"), d("load_s"));
  std::printf("TTFT p50 %.1f ms p99 %.1f ms; TPOT p50 %.2f ms p99 %.2f ms\n", d("ttft_ms_p50"), d("ttft_ms_p99"),
              d("tpot_ms_p50"), d("tpot_ms_p99"));
  std::fflush(stdout);
}

// The timed run of a shape after o.warmup_runs untimed ones (their prompts
// drawn from another seed): the first run of a shape pays one-time costs (a
// device backend's lazy kernel loading, the step graphs' warm-up and capture,
// library plans) that a short timed run would count and a server pays once.
nlohmann::json measure_warm(const ThroughputOptions& o, LoadedModel& m, const KvCachePlan& plan, int num_seqs,
                            int num_prompts, int64_t max_batch_fits) {
  for (int i = 0; i < o.warmup_runs; ++i) {
    ThroughputOptions warm = o;
    warm.seed = o.seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
    (void)measure(warm, m, plan, num_seqs, num_prompts, max_batch_fits);
  }
  nlohmann::json j = measure(o, m, plan, num_seqs, num_prompts, max_batch_fits);
  j["warmup_runs"] = o.warmup_runs;
  return j;
}

// max_num_seqs 0 (auto): as many sequences as the KV cache holds with their
// whole input + output (no preemption), at most the number of prompts.
// num_prompts 0: one full batch (as many prompts as that cap), i.e. one wave
// at the largest batch the budget holds: the max throughput in the least time.
// Sweep: max_num_seqs = 1, 2, 4, ... up to that cap (and the cap itself), or
// the --sweep-seqs values (capped); with num_prompts 0 each point runs one
// batch of its own size.
// Runs already made, by (KV pages, batch, prompts): a budget that gives the
// same engine as a larger one (the batch capped by --max-num-seqs, not by
// memory) is the same computation, so its line repeats that measurement with
// its own memory plan and "measured_with_budget" naming the run's budget.
using RunCache = std::map<std::tuple<int64_t, int64_t, int64_t>, nlohmann::json>;

void run_budget(const ThroughputOptions& o, LoadedModel& m, const KvCachePlan& plan, RunCache& done) {
  const int64_t pages_per_seq = (o.input_len + o.output_len + o.engine.page_size - 1) / o.engine.page_size;
  const int64_t fits = plan.budget_pages / pages_per_seq;
  const int64_t allocated = std::max<int64_t>(1, plan.num_pages / pages_per_seq);
  int64_t cap = allocated;  // auto: no preemption
  if (o.engine.max_num_seqs > 0) {
    // An explicit limit with N prompts is taken as given (preemption included);
    // with --num-prompts 0 (one full batch) it is a bound on the auto size.
    cap = o.num_prompts > 0 ? o.engine.max_num_seqs : std::min<int64_t>(o.engine.max_num_seqs, allocated);
  }
  if (o.num_prompts > 0) cap = std::min<int64_t>(cap, o.num_prompts);
  const int prompts = o.num_prompts > 0 ? o.num_prompts : static_cast<int>(cap);  // 0: one full batch
  if (!o.sweep && o.sweep_seqs.empty()) {
    const auto key = std::make_tuple(plan.num_pages, cap, static_cast<int64_t>(prompts));
    auto it = done.find(key);
    if (it == done.end()) {
      nlohmann::json j = measure_warm(o, m, plan, static_cast<int>(cap), prompts, fits);
      print_throughput(j, o.json);
      done.emplace(key, std::move(j));
      return;
    }
    nlohmann::json j = it->second;
    j["measured_with_budget"] = it->second["memory_budget"];
    put_memory_plan(plan, j);
    j["max_batch_fits"] = fits;
    print_throughput(j, o.json);
    return;
  }
  // The points: --sweep-seqs (capped, each once, in the given order) or 1, 2, 4, ... up to the cap.
  std::vector<int> points;
  if (o.sweep_seqs.empty()) {
    for (int seqs = 1;; seqs = std::min<int>(seqs * 2, static_cast<int>(cap))) {
      points.push_back(seqs);
      if (seqs == cap) break;
    }
  } else {
    for (int s : o.sweep_seqs) {
      const int seqs = static_cast<int>(std::min<int64_t>(s, cap));
      if (std::find(points.begin(), points.end(), seqs) == points.end()) points.push_back(seqs);
    }
  }
  nlohmann::json best;
  for (int seqs : points) {
    const nlohmann::json j = measure_warm(o, m, plan, seqs, o.num_prompts > 0 ? prompts : seqs, fits);
    print_throughput(j, o.json);
    if (best.is_null() || j["output_tokens_per_s"].get<double>() > best["output_tokens_per_s"].get<double>()) best = j;
  }
  nlohmann::json summary = {{"bench", "throughput_sweep"},
                            {"arch", best["arch"]},
                            {"precision", best["precision"]},
                            {"device", best["device"]},
                            {"memory_budget", best["memory_budget"]},
                            {"kv_pages_total", best["kv_pages_total"]},
                            {"best_max_num_seqs", best["max_num_seqs"]},
                            {"output_tokens_per_s", best["output_tokens_per_s"]},
                            {"peak_batch", best["peak_batch"]}};
  if (o.json) {
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf("sweep: best max_num_seqs %d: %.1f output tokens/s\n", best["max_num_seqs"].get<int>(),
                best["output_tokens_per_s"].get<double>());
  }
  std::fflush(stdout);
}

}  // namespace

int run_throughput(const ThroughputOptions& o) {
  if (o.input_len < 1 || o.output_len < 1 || o.num_prompts < 0)
    fail(ErrorCode::kInvalidArgument, "--input-len and --output-len must be >= 1, --num-prompts >= 0");
  if (o.engine.max_num_seqs < 0) fail(ErrorCode::kInvalidArgument, "--max-num-seqs must be >= 0");
  for (int s : o.sweep_seqs)
    if (s < 1) fail(ErrorCode::kInvalidArgument, "--sweep-seqs takes sequence counts >= 1, got {}", s);
  if (o.engine.page_size < 1) fail(ErrorCode::kInvalidArgument, "--page-size must be >= 1");
  if (o.warmup_runs < 0) fail(ErrorCode::kInvalidArgument, "--warmup-runs must be >= 0");
  if (o.ab()) {
    if (o.engine.device != "cuda")
      fail(ErrorCode::kInvalidArgument,
           "--ab-plans / --ab-switch: the W4A8 GEMM plans and kernel forms are the CUDA backend's (--device cuda)");
    if (o.ab_order.empty() || o.ab_order.find_first_not_of("AB") != std::string::npos)
      fail(ErrorCode::kInvalidArgument, "--ab-order takes the letters A and B, got '{}'", o.ab_order);
    if (!o.ab_plans.empty() && std::getenv("QSERVE_W4A8_PLANS") != nullptr)
      fail(ErrorCode::kInvalidArgument, "--ab-plans: side A is the measured table; unset QSERVE_W4A8_PLANS");
    check_w4a8_plan_overrides(o.ab_plans);  // a malformed spec or switch fails here, before the load
    for (const std::string& s : o.ab_switches) check_w4a8_switch(s);
  }
  std::vector<int64_t> budgets = o.memory_budgets;
  if (budgets.empty()) budgets.push_back(o.engine.memory_budget);
  // Loaded once, checked against the largest budget (0: the whole device).
  EngineConfig load = o.engine;
  load.memory_budget = std::find(budgets.begin(), budgets.end(), 0) != budgets.end()
                           ? 0
                           : *std::max_element(budgets.begin(), budgets.end());
  LoadedModel m = load_engine_model(load);

  // Every budget's plan before any KV cache exists (the device's free memory is
  // then the same for all); a budget that holds no page is reported, not fatal.
  struct Point {
    int64_t budget = 0;
    KvCachePlan plan;
    std::string error;
  };
  std::vector<Point> points;
  for (int64_t b : budgets) {
    Point p;
    p.budget = b;
    EngineConfig sizing = m.config;
    sizing.memory_budget = b;
    if (sizing.max_num_seqs == 0) sizing.max_num_seqs = o.num_prompts > 0 ? o.num_prompts : kMaxAutoSeqs;
    try {
      p.plan = plan_kv_cache(m, sizing);
      const int64_t pages_per_seq = (o.input_len + o.output_len + o.engine.page_size - 1) / o.engine.page_size;
      // One full batch (--num-prompts 0) never runs more sequences than the budget
      // holds: plan again with that bound, so the reserve for the logits of
      // sequences that cannot run (kv_memory_plan.h) goes back to the KV cache.
      const int64_t fits = p.plan.budget_pages / pages_per_seq;
      if (o.num_prompts == 0 && fits >= 1 && fits < sizing.max_num_seqs) {
        sizing.max_num_seqs = static_cast<int>(fits);
        p.plan = plan_kv_cache(m, sizing);
      }
      if (p.plan.num_pages < pages_per_seq)
        fail(ErrorCode::kResourceExhausted, "{} {}: the KV cache ({} pages of {} tokens) holds no sequence of {} tokens",
             m.runner->name(), m.config.precision, p.plan.num_pages, o.engine.page_size, o.input_len + o.output_len);
    } catch (const Error& e) {
      if (budgets.size() == 1) throw;
      p.error = e.what();
    }
    points.push_back(std::move(p));
  }
  // A budget that cannot run is one line with "error"; the others still run.
  auto report_error = [&](int64_t budget, const std::string& error) {
    const std::string arch = m.config.load_format == "dummy" ? m.config.arch : m.runner->name();
    const nlohmann::json j = {{"bench", "throughput"},         {"arch", arch},
                              {"precision", m.config.precision}, {"device", m.config.device},
                              {"memory_budget", budget},         {"input_len", o.input_len},
                              {"output_len", o.output_len},      {"num_prompts", o.num_prompts},
                              {"weight_bytes", m.weight_bytes},  {"error", error}};
    if (o.json) std::printf("%s\n", j.dump().c_str());
    else std::printf("memory budget %lld: %s\n", static_cast<long long>(budget), error.c_str());
    std::fflush(stdout);
  };
  int failures = 0, passes = 0;
  // One pass over the budgets.
  auto run_pass = [&](const ThroughputOptions& pass) {
    ++passes;
    RunCache done;
    for (const Point& p : points) {
      if (!p.error.empty()) {
        ++failures;
        report_error(p.budget, p.error);
        continue;
      }
      m.config.memory_budget = p.budget;
      try {
        run_budget(pass, m, p.plan, done);
      } catch (const Error& e) {
        if (points.size() == 1) throw;
        ++failures;
        report_error(p.budget, e.what());
      }
    }
  };
  if (!o.ab()) {
    run_pass(o);
  } else {
    // One pass per letter of --ab-order, the plans and switches set and the captured graphs dropped before each.
    for (const char side : o.ab_order) {
      ThroughputOptions pass = o;
      pass.side = std::string(1, side);
      set_w4a8_plan_overrides(side == 'B' ? o.ab_plans : "");
      reset_w4a8_switches();
      if (side == 'B')
        for (const std::string& s : o.ab_switches) set_w4a8_switch(s);
      m.runner->model().drop_graphs();
      run_pass(pass);
    }
    set_w4a8_plan_overrides("");
    reset_w4a8_switches();
  }
  return failures == static_cast<int>(points.size()) * passes ? 1 : 0;
}

}  // namespace qserve::cli
