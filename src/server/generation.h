// One HTTP generation request fanned out into its engine requests (n choices x
// prompts), their outputs merged into one queue the connection thread drains.
// Destroying a Generation cancels whatever is still running: a client that
// goes away frees its KV pages.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "qserve/engine.h"

namespace qserve::server {

struct IndexedOutput {
  int index = 0;  // the choice
  RequestOutput output;
};

class Generation {
 public:
  explicit Generation(Engine& engine) : engine_(engine), queue_(std::make_shared<Queue>()) {}
  ~Generation() { cancel(); }
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits one choice. Throws qserve::Error from Engine::submit; the choices
  // submitted before stay owned (and are cancelled on destruction).
  void submit(const Request& request, int index);
  // The next output of any choice; nullopt on timeout.
  std::optional<IndexedOutput> next(std::chrono::milliseconds timeout);
  // True once every choice delivered its final output.
  bool done() const { return finished_ == static_cast<int>(ids_.size()); }
  void cancel();

 private:
  struct Queue {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<IndexedOutput> items;
  };
  Engine& engine_;
  std::shared_ptr<Queue> queue_;  // shared with the engine-thread callbacks
  std::vector<uint64_t> ids_;
  std::vector<bool> id_finished_;
  std::vector<int> indices_;
  int finished_ = 0;
};

}  // namespace qserve::server
