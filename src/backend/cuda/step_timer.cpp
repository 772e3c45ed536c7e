#include "backend/cuda/step_timer.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace qserve::cuda {

namespace {
// QSERVE_STEP_TIMING, read once per process: 0 off, 1 on ("1"), 2 on with
// every step's figures in the report ("steps").
int timing_mode() {
  static const int mode = [] {
    const char* v = std::getenv("QSERVE_STEP_TIMING");
    if (v == nullptr) return 0;
    return std::strcmp(v, "steps") == 0 ? 2 : std::strcmp(v, "1") == 0 ? 1 : 0;
  }();
  return mode;
}
}  // namespace

StepTimer::StepTimer() {
  QS_CUDA_CHECK(cudaEventCreate(&start_));
  QS_CUDA_CHECK(cudaEventCreate(&stop_));
  QS_CUDA_CHECK(cudaEventCreate(&prev_stop_));
  totals_.series = timing_mode() == 2;
}

StepTimer::~StepTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  cudaEventDestroy(prev_stop_);
}

bool StepTimer::enabled() { return timing_mode() > 0; }

void StepTimer::begin(cudaStream_t stream) {
  QS_CUDA_CHECK(cudaEventRecord(start_, stream));
  if (open_) have_prev_ = false;  // the previous step never ended: its gap is unknown
  open_ = true;
  ended_ = false;
}

void StepTimer::end(cudaStream_t stream) {
  if (!open_ || ended_) return;
  QS_CUDA_CHECK(cudaEventRecord(stop_, stream));
  ended_ = true;
}

void StepTimer::collect() {
  if (!open_ || !ended_) return;
  float span_ms = 0.f, gap_ms = 0.f;
  QS_CUDA_CHECK(cudaEventElapsedTime(&span_ms, start_, stop_));
  if (have_prev_) {
    QS_CUDA_CHECK(cudaEventElapsedTime(&gap_ms, prev_stop_, start_));
    totals_.idle_us.push_back(gap_ms * 1e3f);
  }
  totals_.busy_us.push_back(span_ms * 1e3f);
  std::swap(stop_, prev_stop_);  // this step's end is the next one's reference
  have_prev_ = true;
  open_ = false;
}

}  // namespace qserve::cuda
