#include "core/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace qserve {
namespace {

// Polling budget before sleeping (thread_pool.h): 4,096 pauses took ~55 us on
// the 2-core Xeon the project is developed on (a pause is ~10-140 cycles,
// depending on the core).
constexpr int kSpinIterations = 4096;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

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
    stop_.store(true, std::memory_order_relaxed);
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
    chunks_done_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
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
    chunks_done_.fetch_add(1, std::memory_order_release);
  }
  for (int s = 0; s < kSpinIterations && chunks_done_.load(std::memory_order_acquire) != chunks; ++s) cpu_relax();
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return chunks_done_.load(std::memory_order_relaxed) == job_chunks_; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int /*index*/) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto has_work = [&] { return job_ != nullptr && next_chunk_ < job_chunks_; };
  for (;;) {
    if (!has_work()) {
      // Poll a while for the next job without the lock, then sleep.
      const uint64_t seen = generation_.load(std::memory_order_relaxed);
      lock.unlock();
      for (int s = 0; s < kSpinIterations && generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_relaxed); ++s)
        cpu_relax();
      lock.lock();
      work_cv_.wait(lock, [&] { return stop_.load(std::memory_order_relaxed) || has_work(); });
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    while (has_work()) {
      const int c = next_chunk_++;
      const auto* fn = job_;
      const int64_t b = c * job_chunk_;
      const int64_t e = std::min(job_n_, b + job_chunk_);
      lock.unlock();
      (*fn)(b, e);
      lock.lock();
      if (chunks_done_.fetch_add(1, std::memory_order_release) + 1 == job_chunks_) done_cv_.notify_all();
    }
  }
}

}  // namespace qserve
