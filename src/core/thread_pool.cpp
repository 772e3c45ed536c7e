#include "core/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace qserve {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) {
    if (const char* env = std::getenv("QSERVE_NUM_THREADS")) num_threads = std::atoi(env);
  }
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
std::mutex g_global_mutex;
int g_global_threads = 0;         // requested size; 0: default
ThreadPool* g_global = nullptr;   // created once, never destroyed before exit
}  // namespace

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_global_mutex);
  if (g_global == nullptr) {
    static ThreadPool pool(g_global_threads);
    g_global = &pool;
  }
  return *g_global;
}

bool ThreadPool::set_global_threads(int num_threads) {
  std::lock_guard<std::mutex> lock(g_global_mutex);
  if (g_global != nullptr) return num_threads <= 0 || g_global->num_threads() == num_threads;
  g_global_threads = num_threads;
  return true;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = std::max<int64_t>(1, n / grain);
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads(), max_chunks));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  const int64_t chunk = (n + chunks - 1) / chunks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_chunks_ = chunks;
    next_chunk_ = 0;
    chunks_done_ = 0;
    ++generation_;
  }
  work_cv_.notify_all();
  // The caller works too.
  for (;;) {
    int c;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_chunk_ >= job_chunks_) break;
      c = next_chunk_++;
    }
    const int64_t b = c * chunk;
    fn(b, std::min(n, b + chunk));
    std::lock_guard<std::mutex> lock(mutex_);
    ++chunks_done_;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return chunks_done_ == job_chunks_; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int /*index*/) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr && next_chunk_ < job_chunks_); });
    if (stop_) return;
    while (job_ != nullptr && next_chunk_ < job_chunks_) {
      const int c = next_chunk_++;
      const auto* fn = job_;
      const int64_t b = c * job_chunk_;
      const int64_t e = std::min(job_n_, b + job_chunk_);
      lock.unlock();
      (*fn)(b, e);
      lock.lock();
      if (++chunks_done_ == job_chunks_) done_cv_.notify_all();
    }
    seen = generation_;
  }
}

}  // namespace qserve
