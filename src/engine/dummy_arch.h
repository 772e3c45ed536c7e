// Named model shapes for `--load-format dummy` (random weights, no checkpoint):
// the real Hugging Face configs of the Llama models the serving benchmark
// compares against (docs/serving-benchmark.md), plus small shapes for CI.
//
//   name          hidden layers heads kv  intermediate vocab   rope theta context
//   llama-2-7b    4096   32     32    32  11008        32000   1e4        4096
//   llama-2-13b   5120   40     40    40  13824        32000   1e4        4096
//   llama-2-70b   8192   80     64    8   28672        32000   1e4        4096
//   llama-3-8b    4096   32     32    8   14336        128256  5e5        8192
//   llama-3-70b   8192   80     64    8   28672        128256  5e5        8192
//   llama-3.2-1b  2048   16     32    8   8192         128256  5e5        8192   (head_dim 64)
//   llama-3.2-3b  3072   28     24    8   8192         128256  5e5        8192
//   tiny          256    2      2     1   512          1024    1e4        2048   (head_dim 128)
//   tiny-odd      200    3      5     1   328          999     1e4        512    (head_dim 40; k % 128 != 0)
//
// bench/peer_hf_generate.py holds the same table for the Hugging Face peer run.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "model/model_config.h"

namespace qserve {

// The names above, in table order.
std::vector<std::string> dummy_arch_names();
// The Hugging Face config.json of a named shape; Error(kInvalidArgument) listing the names.
nlohmann::json dummy_arch_config_json(const std::string& arch);
// The same, parsed. EOS ids are dropped: dummy weights have no tokenizer and
// generate until max_tokens (the benchmark ignores EOS anyway).
ModelConfig dummy_arch_config(const std::string& arch);

}  // namespace qserve
