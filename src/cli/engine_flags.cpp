#include "cli/engine_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/byte_size.h"
#include "core/error.h"
#include "engine/dummy_arch.h"

namespace qserve::cli {

int64_t byte_size_flag(const std::string& v, const std::string& flag) {
  try {
    return parse_byte_size(v, flag);
  } catch (const Error& e) {
    throw CLI::ValidationError(flag, e.what());
  }
}

void add_model_flags(CLI::App* sub, EngineConfig& e) {
  sub->add_option("--precision", e.precision,
                  "auto | fp16 | w8a8kv8 | w4a16 | w4a8kv8 | w4a8kv4 | w4a8kv8-chn | w4a8kv4-chn "
                  "(W4A8: g128 unless -chn; auto: the checkpoint's, fp16 for dummy weights)")
      ->capture_default_str();
  sub->add_option("--load-format", e.load_format, "auto | dummy (random weights of --arch, token ids only)")
      ->capture_default_str();
  sub->add_option("--arch", e.arch, fmt::format("Shape of dummy weights: {}", fmt::join(dummy_arch_names(), ", ")));
  sub->add_option_function<std::string>(
      "--memory-budget", [&e](const std::string& v) { e.memory_budget = byte_size_flag(v, "--memory-budget"); },
      "Emulate a card of this many bytes (80e9, 48GB, 80GiB; default: the device's memory; the CPU: 1 GiB of KV)");
  sub->add_option("--gpu-memory-utilization", e.gpu_memory_utilization,
                  "Fraction of the card for weights + KV cache + workspace")
      ->capture_default_str();
}

void copy_model_flags(const EngineConfig& from, EngineConfig& to) {
  to.precision = from.precision;
  to.load_format = from.load_format;
  to.arch = from.arch;
  to.memory_budget = from.memory_budget;
  to.gpu_memory_utilization = from.gpu_memory_utilization;
}

}  // namespace qserve::cli
