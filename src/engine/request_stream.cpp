// RequestStream: a blocking per-request output queue (include/qserve/engine.h).
#include "core/error.h"
#include "qserve/engine.h"

namespace qserve {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

std::optional<RequestOutput> RequestStream::next() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !queue_.empty() || final_taken_; });
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  if (out.finished) final_taken_ = true;
  return out;
}

std::optional<RequestOutput> RequestStream::next_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || final_taken_; })) return std::nullopt;
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  if (out.finished) final_taken_ = true;
  return out;
}

bool RequestStream::finished() const {
  std::lock_guard lock(mutex_);
  return final_taken_;
}

void RequestStream::cancel() {
  std::function<void()> fn;
  {
    std::lock_guard lock(mutex_);
    if (final_pushed_) return;
    fn = cancel_fn_;
  }
  if (fn) fn();
}

void RequestStream::push(RequestOutput output) {
  {
    std::lock_guard lock(mutex_);
    QS_CHECK(!final_pushed_) << "output pushed after the final one, request " << id_;
    if (output.finished) final_pushed_ = true;
    queue_.push_back(std::move(output));
  }
  cv_.notify_all();
}

void RequestStream::bind_cancel(std::function<void()> cancel_fn) {
  std::lock_guard lock(mutex_);
  cancel_fn_ = std::move(cancel_fn);
}

}  // namespace qserve
