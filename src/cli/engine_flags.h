// The flags that choose what the engine runs and in how much memory, one
// table for generate, serve and bench (vLLM's names): --load-format, --arch,
// --precision, --memory-budget, --gpu-memory-utilization. Each writes its
// EngineConfig field; docs/serving-benchmark.md says what they do.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "qserve/engine.h"

namespace qserve::cli {

void add_model_flags(CLI::App* sub, EngineConfig& e);
// A byte count flag ("80e9", "48GB", "80GiB"); a bad one is a bad command line (exit status 2).
int64_t byte_size_flag(const std::string& value, const std::string& flag);
// Copies the fields add_model_flags sets from `from` into `to`.
void copy_model_flags(const EngineConfig& from, EngineConfig& to);

}  // namespace qserve::cli
