// qserve bench throughput: the command line (the run is cmd_bench_throughput.cpp).
#include "cli/cmd_bench.h"

#include <memory>

#include "cli/app.h"
#include "cli/engine_flags.h"

namespace qserve::cli {

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks of the serving engine");
  bench->require_subcommand(1);
  auto o = std::make_shared<ThroughputOptions>();
  auto* tp = bench->add_subcommand("throughput", "Maximum generation throughput: all prompts at once, EOS ignored");
  EngineConfig& e = o->engine;
  tp->add_option("--model", e.model, "Model directory or .gguf file (default: the default model)")
      ->envname("QSERVE_MODEL");
  tp->add_option("--device", e.device, "cpu | cuda")->capture_default_str()->envname("QSERVE_DEVICE");
  add_model_flags(tp, e);
  tp->add_option("--input-len", o->input_len, "Prompt tokens per request")->capture_default_str();
  tp->add_option("--output-len", o->output_len, "Generated tokens per request")->capture_default_str();
  tp->add_option("--num-prompts", o->num_prompts,
                 "Requests (0: one full batch, as many as --max-num-seqs or the KV cache allows)")->capture_default_str();
  tp->add_option("--max-num-seqs", e.max_num_seqs,
                 "Batch size limit (0: as many sequences as the KV cache holds whole, at most --num-prompts)")
      ->capture_default_str()->envname("QSERVE_MAX_NUM_SEQS");
  tp->add_option("--max-num-batched-tokens", e.max_num_batched_tokens, "Tokens per step")->capture_default_str();
  tp->add_option("--max-model-len", e.max_model_len, "Context length (0: the model's)")->capture_default_str();
  tp->add_option("--page-size", e.page_size, "Tokens per KV page")->capture_default_str();
  tp->add_option("--num-kv-pages", e.num_kv_pages, "KV pages (0: from --kv-cache-bytes or the memory budget)")
      ->capture_default_str();
  tp->add_option_function<std::string>(
        "--kv-cache-bytes", [&e](const std::string& v) { e.kv_cache_bytes = byte_size_flag(v, "--kv-cache-bytes"); },
        "KV cache bytes (0: from the memory budget; 4e9, 4GiB, ...)");
  tp->add_option_function<std::vector<std::string>>(
        "--memory-budgets",
        [o](const std::vector<std::string>& v) {
          o->memory_budgets.clear();
          for (const std::string& s : v) o->memory_budgets.push_back(byte_size_flag(s, "--memory-budgets"));
        },
        "Several budgets on one loaded model, one result each (0: the device's memory): 0,80GB,48GB")
      ->delimiter(',');
  tp->add_option("--threads", e.num_threads, "CPU threads (0: all cores)")->capture_default_str()
      ->envname("QSERVE_NUM_THREADS");
  tp->add_option("--seed", o->seed, "Seed of the random prompts and of dummy weights")->capture_default_str();
  tp->add_option("--warmup-runs", o->warmup_runs,
                 "Untimed runs of each shape before the timed one (lazy kernel loading, step graph capture)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  tp->add_flag("--json", o->json, "One JSON line on stdout (per sweep point)");
  tp->add_flag("--sweep", o->sweep,
               "Run max_num_seqs = 1, 2, 4, ... up to --max-num-seqs (0: what the KV cache holds); report the best");
  tp->add_option("--sweep-seqs", o->sweep_seqs,
                 "A sweep over these max_num_seqs values instead of 1, 2, 4, ... (each at most the cap that "
                 "--max-num-seqs and the KV cache give): 128,256")
      ->delimiter(',');
  tp->add_option("--ab-plans", o->ab_plans,
                 "A/B of W4A8 GEMM plans on one loaded model (--device cuda): every run once per letter of "
                 "--ab-order, A with the measured table, B with these overrides (QSERVE_W4A8_PLANS syntax); "
                 "JSON lines carry \"v\": A or B");
  tp->add_option("--ab-switch", o->ab_switches,
                 "A/B of a W4A8 kernel-form switch on one loaded model (--device cuda), as --ab-plans: B with "
                 "NAME=0|1 set (QSERVE_W4A8_CLUSTER_PUSH, QSERVE_W4A8_CLUSTER_PAIR, QSERVE_W4A8_UNSPLIT_TWINS, "
                 "QSERVE_W4A8_PUSH_APART, QSERVE_W4A8_PUSH_ASYNC, QSERVE_W4A8_PUSH_FEWER_STAGES, QSERVE_W4A8_X_3D, QSERVE_W4A8_FIRST_STAGES), "
                 "A with the environment's; repeatable, and with --ab-plans both go to B");
  tp->add_option("--ab-order", o->ab_order, "The passes of --ab-plans / --ab-switch, A and B letters")
      ->capture_default_str();
  set_command_body(bench, [o, tp]() -> int {
    if (tp->parsed()) {
      ThroughputOptions run = *o;
      run.engine.seed = o->seed;
      return run_throughput(run);
    }
    return 2;
  });
}

}  // namespace qserve::cli
