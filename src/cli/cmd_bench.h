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
  bool json = false;
  bool sweep = false;
  // > 1 entry: one run (or sweep) per memory budget on one loaded model, the
  // largest first (0: the device's memory); replaces engine.memory_budget.
  std::vector<int64_t> memory_budgets;
  // --ab-plans: every run once per letter of ab_order, with the W4A8 plan
  // overrides (QSERVE_W4A8_PLANS syntax) none (A: the measured table) or
  // ab_plans (B), on the one loaded model; each JSON line carries "v": its side.
  std::string ab_plans;
  std::string ab_order = "ABBA";
  std::string side;  // the pass being run ("A" / "B"; empty outside --ab-plans)
};

// Prints one line (text or JSON) per run, or per sweep point plus the best; returns the exit code.
int run_throughput(const ThroughputOptions& o);

}  // namespace qserve::cli
