// qserve bench throughput (src/cli/cmd_bench.cpp: flags; cmd_bench_throughput.cpp: the run).
#pragma once

#include <cstdint>
#include <vector>

#include "qserve/engine.h"

namespace qserve::cli {

struct ThroughputOptions {
  EngineConfig engine;   // engine.max_num_seqs == 0: as many sequences as the KV cache holds whole
  int input_len = 1024;
  int output_len = 512;
  int num_prompts = 64;
  uint64_t seed = 0;     // of the random prompts
  // Untimed runs of each measured shape before the timed one: a shape's first
  // run pays one-time costs (a device backend's lazy kernel loading, its step
  // graphs' warm-up and capture, library plans) that a server pays once at
  // its start. 0: the timed run is the first (the figures before round 55).
  int warmup_runs = 1;
  bool json = false;
  bool sweep = false;
  // A sweep over these max_num_seqs values (each at most the cap that
  // --max-num-seqs and the KV cache give) instead of 1, 2, 4, ...; implies sweep.
  std::vector<int> sweep_seqs;
  // > 1 entry: one run (or sweep) per memory budget on one loaded model, the
  // largest first (0: the device's memory); replaces engine.memory_budget.
  std::vector<int64_t> memory_budgets;
  // --ab-plans / --ab-switch: every run once per letter of ab_order on the one
  // loaded model, side A with the process's W4A8 settings (the measured table,
  // the environment's kernel-form switches), side B with ab_plans as plan
  // overrides (QSERVE_W4A8_PLANS syntax) and the ab_switches ("NAME=0|1",
  // gemm_w4a8_switches.h) set; each JSON line carries "v": its side.
  std::string ab_plans;
  std::vector<std::string> ab_switches;
  std::string ab_order = "ABBA";
  bool ab() const { return !ab_plans.empty() || !ab_switches.empty(); }
  std::string side;  // the pass being run ("A" / "B"; empty outside an A/B)
};

// Prints one line (text or JSON) per run, or per sweep point plus the best; returns the exit code.
int run_throughput(const ThroughputOptions& o);

}  // namespace qserve::cli
