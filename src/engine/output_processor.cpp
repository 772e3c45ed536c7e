#include "engine/output_processor.h"

#include <algorithm>

#include "core/error.h"

namespace qserve {

OutputProcessor::OutputProcessor(const GenerationParams& params, int max_new_tokens, std::vector<int32_t> eos_ids,
                                 std::unique_ptr<TextStream> text)
    : params_(params), max_new_tokens_(max_new_tokens), eos_ids_(std::move(eos_ids)), text_(std::move(text)) {
  QS_CHECK(max_new_tokens >= 1) << "max_new_tokens " << max_new_tokens;
  if (params_.min_tokens > 0) {
    suppress_ = params_.stop_token_ids;
    if (!params_.ignore_eos) suppress_.insert(suppress_.end(), eos_ids_.begin(), eos_ids_.end());
  }
}

const std::vector<int32_t>& OutputProcessor::suppressed_ids() const {
  static const std::vector<int32_t> kNone;
  return num_generated_ < params_.min_tokens ? suppress_ : kNone;
}

bool OutputProcessor::is_stop_id(int32_t token) const {
  auto has = [&](const std::vector<int32_t>& ids) { return std::find(ids.begin(), ids.end(), token) != ids.end(); };
  return (!params_.ignore_eos && has(eos_ids_)) || has(params_.stop_token_ids);
}

bool OutputProcessor::release_text(RequestOutput& out, bool final) {
  // Earliest match of any stop string in the pending text. Emitted text never
  // holds the start of a match: a suffix that could begin one is kept back.
  size_t best = std::string::npos;
  const std::string* matched = nullptr;
  for (const std::string& s : params_.stop) {
    const size_t pos = pending_.find(s);
    if (pos != std::string::npos && (pos < best || (pos == best && s.size() > matched->size()))) {
      best = pos;
      matched = &s;
    }
  }
  if (matched) {
    out.text += pending_.substr(0, best);
    if (params_.include_stop_str_in_output) out.text += *matched;
    out.finish_reason = FinishReason::kStop;
    out.stop_reason = *matched;
    pending_.clear();
    return true;
  }
  size_t hold = 0;
  if (!final) {
    for (const std::string& s : params_.stop) {
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
      }
    }
  }
  out.text += pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return false;
}

bool OutputProcessor::on_token(int32_t token, RequestOutput& out) {
  QS_CHECK(!finished_) << "token after the end of the request";
  ++num_generated_;
  out.token_ids.push_back(token);
  const bool stop_id = num_generated_ > params_.min_tokens - 1 && is_stop_id(token);
  if (text_ && !stop_id) pending_ += text_->step(token);
  if (release_text(out, false)) {
    finished_ = true;
    return true;
  }
  if (stop_id) {
    out.finish_reason = FinishReason::kStop;
    out.stop_reason = std::to_string(token);
  } else if (num_generated_ >= max_new_tokens_) {
    out.finish_reason = FinishReason::kLength;
  } else {
    return false;
  }
  finish(out.finish_reason, out);
  return true;
}

void OutputProcessor::finish(FinishReason reason, RequestOutput& out) {
  if (text_) pending_ += text_->flush();
  finished_ = true;
  if (release_text(out, true)) return;  // a stop string completed by the flush
  out.finish_reason = reason;
}

}  // namespace qserve
