#include "backend/cuda/gemm_w4a8_timeline.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace qserve::cuda {
namespace {

constexpr size_t kSlotInts = static_cast<size_t>(kW4A8TimelineCtas) * kW4A8TimelinePoints;
constexpr size_t kBufferBytes = sizeof(uint64_t) * kSlotInts * kW4A8TimelineSlots;

uint64_t* allocated = nullptr;              // once, never freed (a profiling build's)
std::atomic<uint64_t*> recording{nullptr};  // allocated while on
std::atomic<int> current_slot{0};            // where the next launch records (w4a8_timeline_buffer)

void check_slot(int slot) {
  if (slot < 0 || slot >= kW4A8TimelineSlots)
    fail(ErrorCode::kInvalidArgument, "W4A8 timeline: slot {} outside 0 .. {}", slot, kW4A8TimelineSlots - 1);
}

}  // namespace

const char* w4a8_timeline_point_name(int point) {
  static const char* const names[kW4A8TimelinePoints] = {
      "entry",      "first_weights",     "x_after_wait", "consumer_after_wait", "first_stage",
      "main_loop_done", "cluster_wait_done", "parts_done",   "end",          "loop_cycles",
      "loop_barrier_cycles", "loop_wgmma_cycles", "loop_steps", "sm"};
  return point >= 0 && point < kW4A8TimelinePoints ? names[point] : nullptr;
}

bool w4a8_timeline_built() {
#ifdef QSERVE_GEMM_TIMELINE
  return true;
#else
  return false;
#endif
}

void set_w4a8_timeline(bool on, cudaStream_t stream) {
  if (!on) {
    recording.store(nullptr);
    return;
  }
  if (!w4a8_timeline_built())
    fail(ErrorCode::kUnsupported,
         "W4A8 timeline: this build's kernels do not record (configure with -DQSERVE_GEMM_TIMELINE=ON)");
  if (allocated == nullptr) QS_CUDA_CHECK(cudaMalloc(&allocated, kBufferBytes));
  QS_CUDA_CHECK(cudaMemsetAsync(allocated, 0, kBufferBytes, stream));
  current_slot.store(0);
  recording.store(allocated);
}

void set_w4a8_timeline_slot(int slot) {
  check_slot(slot);
  current_slot.store(slot);
}

uint64_t* w4a8_timeline_buffer() {
  uint64_t* base = recording.load();
  return base == nullptr ? nullptr : base + kSlotInts * current_slot.load();
}

std::vector<uint64_t> read_w4a8_timeline(cudaStream_t stream, int slot) {
  check_slot(slot);
  std::vector<uint64_t> out(kSlotInts, 0);
  if (allocated == nullptr) return out;
  QS_CUDA_CHECK(cudaMemcpyAsync(out.data(), allocated + kSlotInts * slot, kSlotInts * sizeof(uint64_t),
                                cudaMemcpyDeviceToHost, stream));
  QS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

std::string summarize_w4a8_timeline(const std::vector<uint64_t>& record, int ctas) {
  ctas = std::min(ctas, kW4A8TimelineCtas);
  auto at = [&](int cta, int point) { return record[static_cast<size_t>(cta) * kW4A8TimelinePoints + point]; };
  // first / last_end: the earliest entry and the latest end; last_release:
  // the latest release of the PDL wait (about when the previous kernel ended).
  uint64_t first = 0, last_end = 0, last_release = 0;
  int entered = 0;
  std::vector<uint64_t> sms;  // the SMs the recorded CTAs ran on
  for (int c = 0; c < ctas; ++c) {
    if (at(c, kTlEntry) == 0) continue;
    first = entered == 0 ? at(c, kTlEntry) : std::min(first, at(c, kTlEntry));
    last_end = std::max(last_end, at(c, kTlEnd));
    if (at(c, kTlXAfterWait) >= at(c, kTlEntry)) last_release = std::max(last_release, at(c, kTlXAfterWait));
    sms.push_back(at(c, kTlSm));
    ++entered;
  }
  std::sort(sms.begin(), sms.end());
  const auto distinct_sms = std::unique(sms.begin(), sms.end()) - sms.begin();
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "  %d of %d CTAs recorded, on %td SMs\n", entered, ctas, distinct_sms);
  out += line;
  if (entered == 0) return out;
  auto row = [&](const char* name, std::vector<double> us) {
    if (us.empty()) return;
    std::sort(us.begin(), us.end());
    std::snprintf(line, sizeof line, "  %-22s median %8.3f us  max %8.3f us  (%zu CTAs)\n", name, us[us.size() / 2],
                  us.back(), us.size());
    out += line;
  };
  std::vector<double> skew;
  for (int c = 0; c < ctas; ++c)
    if (at(c, kTlEntry) != 0) skew.push_back((at(c, kTlEntry) - first) * 1e-3);
  row("entry (from earliest)", skew);
  for (int point = kTlEntry + 1; point < kW4A8TimelineStamps; ++point) {
    std::vector<double> us;
    for (int c = 0; c < ctas; ++c)
      if (at(c, kTlEntry) != 0 && at(c, point) >= at(c, kTlEntry))  // (0 or a stale earlier launch's: not reached)
        us.push_back((at(c, point) - at(c, kTlEntry)) * 1e-3);
    row(w4a8_timeline_point_name(point), us);
  }
  // Per-CTA phases (the median of each CTA's own difference, not a
  // difference of the medians above: with PDL the CTAs enter microseconds
  // apart and wait different times).
  struct Phase {
    const char* name;
    int from, to, alt_from;  // alt_from: where `from` was not reached (-1: none)
  };
  static const Phase kPhases[] = {
      {"phase: PDL wait", kTlEntry, kTlXAfterWait, -1},
      {"phase: fill", kTlXAfterWait, kTlFirstStage, -1},
      {"phase: main loop", kTlFirstStage, kTlMainLoopDone, -1},
      {"phase: cluster wait", kTlMainLoopDone, kTlClusterWaitDone, -1},
      {"phase: parts", kTlClusterWaitDone, kTlPartsDone, -1},
      {"phase: epilogue", kTlPartsDone, kTlEnd, kTlClusterWaitDone},
      {"phase: wait to end", kTlXAfterWait, kTlEnd, -1},
  };
  for (const Phase& ph : kPhases) {
    std::vector<double> us;
    for (int c = 0; c < ctas; ++c) {
      const uint64_t e = at(c, kTlEntry);
      if (e == 0) continue;
      int from = ph.from;
      if (at(c, from) < e && ph.alt_from >= 0) from = ph.alt_from;
      if (at(c, from) < e || at(c, ph.to) < at(c, from)) continue;  // a point not reached in this launch
      us.push_back((at(c, ph.to) - at(c, from)) * 1e-3);
    }
    row(ph.name, us);
  }
  // The launch after its dependency.
  if (last_release > 0 && last_end > last_release) {
    std::snprintf(line, sizeof line, "  latest wait release to latest end %.3f us\n", (last_end - last_release) * 1e-3);
    out += line;
  }
  if (last_end > first) {
    std::snprintf(line, sizeof line, "  span (earliest entry to latest end) %.3f us\n", (last_end - first) * 1e-3);
    out += line;
  }
  // The main loop's split: each CTA's cycles at its own ratio of the loop's
  // nanoseconds (first stage to main loop done) to its cycles.
  std::vector<double> barrier, wgmma, rest, per_block, ghz;
  for (int c = 0; c < ctas; ++c) {
    const uint64_t e = at(c, kTlEntry), cycles = at(c, kTlLoopCycles), steps = at(c, kTlLoopSteps);
    const uint64_t from = at(c, kTlFirstStage), to = at(c, kTlMainLoopDone);
    if (e == 0 || cycles == 0 || steps == 0 || from < e || to <= from) continue;
    const uint64_t b = at(c, kTlLoopBarrierCycles), w = at(c, kTlLoopWgmmaCycles);
    if (b + w > cycles) continue;  // (not this launch's)
    const double ns_per_cycle = static_cast<double>(to - from) / static_cast<double>(cycles);
    barrier.push_back(b * ns_per_cycle * 1e-3);
    wgmma.push_back(w * ns_per_cycle * 1e-3);
    rest.push_back((cycles - b - w) * ns_per_cycle * 1e-3);
    per_block.push_back(static_cast<double>(to - from) / static_cast<double>(steps) * 1e-3);
    ghz.push_back(1.0 / ns_per_cycle);  // cycles per ns
  }
  if (!barrier.empty()) {
    row("loop: barrier waits", barrier);
    row("loop: wgmma waits", wgmma);
    row("loop: loads+unpack+issue", rest);
    row("loop: per 128-k block", per_block);
    std::sort(ghz.begin(), ghz.end());
    std::snprintf(line, sizeof line, "  loop: SM clock median %.2f GHz\n", ghz[ghz.size() / 2]);
    out += line;
  }
  return out;
}

}  // namespace qserve::cuda
