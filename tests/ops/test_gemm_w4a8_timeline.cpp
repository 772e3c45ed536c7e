// The W4A8 timeline's summary on the host (no GPU needed): per-point times
// since each CTA's entry, the per-CTA phases (each CTA's own differences, so
// that CTAs entering apart under PDL do not blur them), the wait release to
// the latest end. The recording itself runs only in a build configured with
// -DQSERVE_GEMM_TIMELINE=ON (bench_gemm --timeline).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#ifdef QSERVE_HAVE_CUDA
#include "backend/cuda/gemm_w4a8_timeline.h"
#include "core/error.h"
#endif

namespace qserve {
namespace {

#ifdef QSERVE_HAVE_CUDA

using namespace cuda;

// A launch's record [kW4A8TimelineCtas][kW4A8TimelinePoints], all points unreached.
struct Record {
  std::vector<uint64_t> ns = std::vector<uint64_t>(static_cast<size_t>(kW4A8TimelineCtas) * kW4A8TimelinePoints, 0);
  void set(int cta, int point, uint64_t t) { ns[static_cast<size_t>(cta) * kW4A8TimelinePoints + point] = t; }
  // A CTA's main-loop counters (SM cycles; the loop's ns are its first_stage
  // to main_loop_done points).
  void set_loop(int cta, uint64_t cycles, uint64_t barrier, uint64_t wgmma, uint64_t steps) {
    set(cta, kTlLoopCycles, cycles);
    set(cta, kTlLoopBarrierCycles, barrier);
    set(cta, kTlLoopWgmmaCycles, wgmma);
    set(cta, kTlLoopSteps, steps);
  }
};

// The line of `name` in `text` (empty if none).
std::string line_of(const std::string& text, const std::string& name) {
  const size_t at = text.find("  " + name + " ");
  if (at == std::string::npos) return {};
  return text.substr(at, text.find('\n', at) - at);
}

TEST(GemmW4A8Timeline, PhasesAreEachCtasOwnDifferences) {
  Record rec;
  // Three CTAs entering 0, 2 and 4 us apart; the wait releases at the same
  // instant (10 us) for all; fill 3 / 1 / 2 us (median 2, where the
  // difference of the points' medians since entry, 9 - 8, would say 1),
  // main loop 5 us, cluster wait 0.1 us, parts 0.5 us (the third CTA sends
  // only: no parts point), epilogue 0.4 us.
  for (int c = 0; c < 3; ++c) {
    const uint64_t e = 1'000'000 + 2'000 * c, release = 1'010'000;
    const uint64_t stage = release + 1'000 * (c == 0 ? 3 : c);
    rec.set(c, kTlEntry, e);
    rec.set(c, kTlFirstWeights, e + 500);
    rec.set(c, kTlXAfterWait, release);
    rec.set(c, kTlConsumerAfterWait, release);
    rec.set(c, kTlFirstStage, stage);
    rec.set(c, kTlMainLoopDone, stage + 5'000);
    rec.set(c, kTlClusterWaitDone, stage + 5'100);
    if (c < 2) rec.set(c, kTlPartsDone, stage + 5'600);
    rec.set(c, kTlEnd, stage + (c < 2 ? 6'000 : 5'500));
  }
  const std::string s = summarize_w4a8_timeline(rec.ns, 3);
  EXPECT_NE(s.find("3 of 3 CTAs recorded"), std::string::npos) << s;
  // Since each CTA's entry the wait releases at 10 / 8 / 6 us: median 8.
  EXPECT_NE(line_of(s, "x_after_wait").find("median    8.000 us  max   10.000 us"), std::string::npos) << s;
  EXPECT_NE(line_of(s, "phase: PDL wait").find("median    8.000 us  max   10.000 us  (3 CTAs)"), std::string::npos) << s;
  EXPECT_NE(line_of(s, "phase: fill").find("median    2.000 us  max    3.000 us"), std::string::npos) << s;
  EXPECT_NE(line_of(s, "phase: main loop").find("median    5.000 us  max    5.000 us"), std::string::npos) << s;
  EXPECT_NE(line_of(s, "phase: cluster wait").find("median    0.100 us"), std::string::npos) << s;
  EXPECT_NE(line_of(s, "phase: parts").find("(2 CTAs)"), std::string::npos) << s;
  // The sender's epilogue counts from the cluster barrier (0.4 us like the owners').
  EXPECT_NE(line_of(s, "phase: epilogue").find("median    0.400 us  max    0.400 us  (3 CTAs)"), std::string::npos) << s;
  // The latest release (10 us after the first entry) to the latest end (the
  // first CTA: 10 + 3 + 6 = 19 us).
  EXPECT_NE(s.find("latest wait release to latest end 9.000 us"), std::string::npos) << s;
  EXPECT_NE(s.find("span (earliest entry to latest end) 19.000 us"), std::string::npos) << s;
}

TEST(GemmW4A8Timeline, PointsFromAnEarlierLaunchAreNotCounted) {
  Record rec;
  // One CTA of this launch past its main loop; its cluster and parts points
  // are an earlier launch's (before this entry): not reached here.
  rec.set(0, kTlEntry, 2'000'000);
  rec.set(0, kTlXAfterWait, 2'001'000);
  rec.set(0, kTlFirstStage, 2'002'000);
  rec.set(0, kTlMainLoopDone, 2'006'000);
  rec.set(0, kTlClusterWaitDone, 1'500'000);
  rec.set(0, kTlPartsDone, 1'500'500);
  rec.set(0, kTlEnd, 2'006'500);
  const std::string s = summarize_w4a8_timeline(rec.ns, 1);
  EXPECT_EQ(line_of(s, "phase: cluster wait"), "") << s;
  EXPECT_EQ(line_of(s, "phase: parts"), "") << s;
  EXPECT_EQ(line_of(s, "phase: epilogue"), "") << s;  // neither start point reached
  EXPECT_NE(line_of(s, "phase: wait to end").find("median    5.500 us"), std::string::npos) << s;
}

TEST(GemmW4A8Timeline, MainLoopSplitAtEachCtasOwnClock) {
  Record rec;
  // Two CTAs, each a 4-us main loop over 16 blocks (0.25 us a block): the
  // first at 1.8 GHz (7,200 cycles: 1,800 at the barriers = 1 us, 3,600 in
  // wgmma waits = 2 us, the rest 1 us), the second at 1.5 GHz (6,000 cycles:
  // 1,500 = 1 us, 3,000 = 2 us); a third CTA without the counters (a tile
  // that does not record them) is left out of the split.
  for (int c = 0; c < 3; ++c) {
    const uint64_t e = 1'000'000 + 1'000 * c;
    rec.set(c, kTlEntry, e);
    rec.set(c, kTlFirstStage, e + 2'000);
    rec.set(c, kTlMainLoopDone, e + 6'000);
    rec.set(c, kTlEnd, e + 6'500);
    if (c == 2) continue;
    const uint64_t cycles = c == 0 ? 7'200 : 6'000;
    rec.set_loop(c, cycles, cycles / 4, cycles / 2, 16);
  }
  const std::string s = summarize_w4a8_timeline(rec.ns, 3);
  EXPECT_NE(line_of(s, "loop: barrier waits").find("median    1.000 us  max    1.000 us  (2 CTAs)"), std::string::npos) << s;
  EXPECT_NE(line_of(s, "loop: wgmma waits").find("median    2.000 us"), std::string::npos) << s;
  EXPECT_NE(line_of(s, "loop: loads+unpack+issue").find("median    1.000 us"), std::string::npos) << s;
  EXPECT_NE(line_of(s, "loop: per 128-k block").find("median    0.250 us"), std::string::npos) << s;
  EXPECT_NE(s.find("loop: SM clock median 1.80 GHz"), std::string::npos) << s;
  // The counters are not timestamps: no per-point rows for them.
  EXPECT_EQ(line_of(s, "loop_cycles"), "") << s;
}

TEST(GemmW4A8Timeline, MainLoopSplitNeedsConsistentCounters) {
  Record rec;
  // Barrier and wgmma cycles above the loop's (another launch's counters): no split.
  rec.set(0, kTlEntry, 1'000'000);
  rec.set(0, kTlFirstStage, 1'002'000);
  rec.set(0, kTlMainLoopDone, 1'006'000);
  rec.set_loop(0, 1'000, 900, 900, 4);
  const std::string s = summarize_w4a8_timeline(rec.ns, 1);
  EXPECT_EQ(line_of(s, "loop: barrier waits"), "") << s;
}

TEST(GemmW4A8Timeline, CountsTheSmsOfTheRecordedCtas) {
  Record rec;
  // Four CTAs entered, two of them on SM 7 (a cluster's pair may not, but a
  // persistent walk's later units do); a fifth CTA's SM without an entry
  // (not reached) is not counted.
  const uint64_t sm[] = {7, 7, 0, 131};
  for (int c = 0; c < 4; ++c) {
    rec.set(c, kTlEntry, 1'000'000 + c);
    rec.set(c, kTlEnd, 1'005'000);
    rec.set(c, kTlSm, sm[c]);
  }
  rec.set(4, kTlSm, 99);
  const std::string s = summarize_w4a8_timeline(rec.ns, 5);
  EXPECT_NE(s.find("4 of 5 CTAs recorded, on 3 SMs"), std::string::npos) << s;
}

TEST(GemmW4A8Timeline, SlotsOutsideTheBufferAreRefused) {
  // Host checks only, before any CUDA call (no GPU needed); off, there is no buffer.
  EXPECT_THROW(set_w4a8_timeline_slot(-1), Error);
  EXPECT_THROW(set_w4a8_timeline_slot(kW4A8TimelineSlots), Error);
  EXPECT_THROW(read_w4a8_timeline(nullptr, kW4A8TimelineSlots), Error);
  set_w4a8_timeline_slot(kW4A8TimelineSlots - 1);
  EXPECT_EQ(w4a8_timeline_buffer(), nullptr);
  set_w4a8_timeline_slot(0);
}

#else

// The summary is part of the CUDA backend, which a CPU-only build does not have.
TEST(GemmW4A8Timeline, NeedsTheCudaBuild) { GTEST_SKIP() << "skipped: no CUDA backend in this build (CPU-only build)"; }

#endif

}  // namespace
}  // namespace qserve
