// The reference side of `qserve eval compare`: what every device run is
// compared with, computed once (teacher-forced top-1 token and next-token NLL
// at every position, greedy continuations with their top-2 margins, and the
// reports of the control runs), and its file form (--save-reference /
// --load-reference), so that the slow CPU reference can run on another
// machine than the device under test and the device's run takes seconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/llama_model.h"

namespace qserve::cli {

struct ReferenceRuns {
  std::vector<std::vector<int32_t>> windows;  // token ids of each teacher-forced window
  std::vector<Logits> logits;                 // all rows of each window; empty when loaded from a file
  std::vector<std::vector<int32_t>> top1;     // [window][position]: the reference's argmax
  std::vector<std::vector<double>> nll;       // [window][position < seqlen - 1]: NLL of the next token
  std::vector<std::vector<int32_t>> prompt_ids, greedy;
  std::vector<std::vector<float>> margins;    // top-2 margin of the logits that chose greedy[p][i]
  std::vector<nlohmann::json> controls;       // reports of the --control runs against this reference
};

// FNV-1a (64 bit, hex) over a file's bytes, or over every regular file of a
// directory in name order (names included): which checkpoint / text a
// reference file was made from.
std::string content_fingerprint(const std::string& path);

// `key` names what the runs depend on (checkpoint and text fingerprints,
// reference device, seqlen, windows, prompts, greedy length); a loaded file
// must carry the same key, else kInvalidArgument naming the first difference.
void save_reference(const std::string& file, const nlohmann::json& key, const ReferenceRuns& rr);
ReferenceRuns load_reference(const std::string& file, const nlohmann::json& key);

}  // namespace qserve::cli
