// One request's output path after sampling: stop conditions (EOS and stop
// ids, stop strings, max tokens), incremental detokenization, and the text
// held back while it may still turn into a stop string.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/text_codec.h"
#include "qserve/request.h"

namespace qserve {

class OutputProcessor {
 public:
  // max_new_tokens: resolved (>= 1). text: null when no text is produced.
  OutputProcessor(const GenerationParams& params, int max_new_tokens, std::vector<int32_t> eos_ids,
                  std::unique_ptr<TextStream> text);

  // Ids the sampler must not pick now (EOS / stop ids before min_tokens).
  const std::vector<int32_t>& suppressed_ids() const;

  // Takes one generated token: appends it (and its text, if any is complete
  // and cannot be part of a stop string) to `out`. True when it finished the
  // request; then out.finish_reason / stop_reason are set and held text flushed.
  bool on_token(int32_t token, RequestOutput& out);

  // Finishes for an outside reason (cancel, error): flushes held text into out.
  void finish(FinishReason reason, RequestOutput& out);

  int num_generated() const { return num_generated_; }

 private:
  bool is_stop_id(int32_t token) const;
  // Moves text from pending_ to out, keeping back a possible stop-string prefix;
  // true (and finished) if a stop string matched.
  bool release_text(RequestOutput& out, bool final);

  GenerationParams params_;
  int max_new_tokens_;
  std::vector<int32_t> eos_ids_;
  std::vector<int32_t> suppress_;   // eos + stop ids, when min_tokens > 0
  std::unique_ptr<TextStream> text_;
  std::string pending_;             // decoded, not yet emitted
  int num_generated_ = 0;
  bool finished_ = false;
};

}  // namespace qserve
