// The W4 wgmma kernels' recording in a profiling build (configured with
// -DQSERVE_GEMM_TIMELINE=ON; gemm_w4a8_timeline.h): per-CTA phase timestamps
// (%globaltimer) and the main loop's split in SM cycles. In other builds
// every function here compiles to nothing and LoopClock reads no clock.
#pragma once

#include <cstdint>

#include "backend/cuda/gemm_w4a8_timeline.h"
#include "backend/cuda/gemm_w4a8_wgmma_launch.h"

namespace qserve::cuda::w4a8::wgmma {

#ifdef QSERVE_GEMM_TIMELINE
inline constexpr bool kTimeline = true;  // a profiling build (gemm_w4a8_timeline.h)
#else
inline constexpr bool kTimeline = false;
#endif

// The calling thread writes `value` at `point` for its CTA where recording;
// in other builds nothing.
__device__ __forceinline__ void timeline_store(const Params& p, int point, uint64_t value) {
#ifdef QSERVE_GEMM_TIMELINE
  if (p.timeline != nullptr && blockIdx.x < kW4A8TimelineCtas) p.timeline[blockIdx.x * kW4A8TimelinePoints + point] = value;
#else
  (void)p;
  (void)point;
  (void)value;
#endif
}

// The phase timestamps of a profiling build: %globaltimer at `point`.
__device__ __forceinline__ void timeline_mark(const Params& p, int point) {
  if constexpr (kTimeline) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    timeline_store(p, point, t);
  }
}

// A profiling build's SM of the calling thread's CTA at kTlSm.
__device__ __forceinline__ void timeline_mark_sm(const Params& p) {
  if constexpr (kTimeline) {
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    timeline_store(p, kTlSm, sm);
  }
}

// A profiling build's main-loop split (kTlLoop*): SM cycles of the consumer
// thread since `start` (its unit's first stage loaded), summed over the
// unit's steps (a multi-unit walk records its last unit's); in other builds
// nothing is read.
struct LoopClock {
  long long barrier = 0, wgmma = 0, start = 0;
  int steps = 0;
  __device__ __forceinline__ static long long now() { return kTimeline ? clock64() : 0; }
};

}  // namespace qserve::cuda::w4a8::wgmma
