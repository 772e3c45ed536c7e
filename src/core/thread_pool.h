// A fixed pool of worker threads for data-parallel loops (one per core by
// default). parallel_for splits [0, n) into contiguous chunks; the calling
// thread takes a chunk too and returns when all chunks are done.
//
// A decode step is hundreds of short loops back to back (on the default model
// a layer's matmuls take 40-220 us at two threads, its norms far less). With
// workers that slept between loops, two threads streamed those matmuls' weights
// no faster than one (bench/results/2026-12-05-cpu-decode.md): waking a
// sleeping worker took a large part of each loop. A worker that has finished a
// job therefore polls for the next one for a short while (kSpinIterations
// pauses, ~55 us) before it sleeps on the condition variable, and the caller
// polls for the last chunk's end the same way before it sleeps.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qserve {

class ThreadPool {
 public:
  // num_threads <= 0: std::thread::hardware_concurrency() (or QSERVE_NUM_THREADS).
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) over chunks of [0, n); chunks are at least `grain` long.
  // Not reentrant: a parallel_for body must not call parallel_for.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // The process-wide pool, created on first use with set_global_threads()'s
  // count (or QSERVE_NUM_THREADS, or one per core).
  static ThreadPool& global();
  // Sets the size of the process-wide pool; false (and no change) if it
  // already exists with another size.
  static bool set_global_threads(int num_threads);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;
  int job_chunks_ = 0;
  int next_chunk_ = 0;
  std::atomic<int> chunks_done_{0};      // written under mutex_, polled without it
  std::atomic<uint64_t> generation_{0};  // a new job: written under mutex_, polled without it
  std::atomic<bool> stop_{false};
  std::mutex call_mutex_;  // one parallel_for at a time
};

}  // namespace qserve
