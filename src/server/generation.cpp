#include "server/generation.h"

namespace qserve::server {

void Generation::submit(const Request& request, int index) {
  std::weak_ptr<Queue> weak = queue_;
  uint64_t id = engine_.submit(request, [weak, index](const RequestOutput& out) {
    if (auto q = weak.lock()) {  // the callback runs on the engine thread: push and return
      std::lock_guard lock(q->mutex);
      q->items.push_back({index, out});
      q->cv.notify_one();
    }
  });
  ids_.push_back(id);
  id_finished_.push_back(false);
  indices_.push_back(index);
}

std::optional<IndexedOutput> Generation::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(queue_->mutex);
  if (!queue_->cv.wait_for(lock, timeout, [&] { return !queue_->items.empty(); })) return std::nullopt;
  IndexedOutput out = std::move(queue_->items.front());
  queue_->items.pop_front();
  if (out.output.finished) {
    for (size_t i = 0; i < indices_.size(); ++i)
      if (indices_[i] == out.index && !id_finished_[i]) {
        id_finished_[i] = true;
        ++finished_;
        break;
      }
  }
  return out;
}

void Generation::cancel() {
  for (size_t i = 0; i < ids_.size(); ++i)
    if (!id_finished_[i]) engine_.cancel(ids_[i]);  // false if it finished meanwhile: harmless
}

}  // namespace qserve::server
