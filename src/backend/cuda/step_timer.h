// The device's share of the engine's steps (QSERVE_STEP_TIMING=1): an event
// on the stream when a step's first upload is queued (begin_step) and one
// after its last copy back (the sampled tokens or the logits), read once the
// step has synchronized. A step's span is the device time from the one to the
// other; the idle time before it is the gap since the previous step's end,
// when the device had nothing queued while the host scheduled, built the
// step's metadata and launched it. `qserve bench throughput` reports both
// (backend.h, StepTiming), so that the host's part of a decode step shows.
// QSERVE_STEP_TIMING=steps adds each step's two figures in step order to the
// JSON, to see where the slow steps fall (a tail the median hides).
// Off by default: two event records and two reads a step, and every step's
// two figures kept (8 bytes a step): meant for benchmarks, not a server left
// running for days.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/backend.h"

namespace qserve::cuda {

class StepTimer {
 public:
  StepTimer();
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  // Whether QSERVE_STEP_TIMING=1 or =steps (read once per process; `steps`
  // sets StepTiming::series: `bench throughput` reports every step in order).
  static bool enabled();

  // Records the step's start on `stream`; a step begun and never ended is
  // dropped (no span, and the next gap is not counted).
  void begin(cudaStream_t stream);
  // Records the step's end on `stream` and, once the caller has synchronized
  // the stream, collect() adds the step. No-ops without an open step.
  void end(cudaStream_t stream);
  void collect();

  const StepTiming& totals() const { return totals_; }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr, prev_stop_ = nullptr;
  bool open_ = false, ended_ = false, have_prev_ = false;
  StepTiming totals_;
};

}  // namespace qserve::cuda
