// Per-CTA timestamps of the sm_90a W4 wgmma kernels' phases, for profiling
// what a small-m launch spends its time on (docs/gemm-hopper.md, "What
// limits it"): the pipeline's fill, the main loop, the split-K reduction's
// barriers, the epilogue. Compiled into the kernels only in a build
// configured with -DQSERVE_GEMM_TIMELINE=ON (a separate build: the kernels of
// the normal build carry no trace of it); there, while switched on, each CTA
// of a W4 wgmma launch writes %globaltimer (ns) at each point it reaches into
// a device buffer [kW4A8TimelineCtas][kW4A8TimelinePoints] u64, every launch
// over the previous one's values (so that a read after a series of launches
// gives the last one's). bench_gemm --timeline prints them. Several launches
// in a row (a decoder layer's GEMMs: bench_gemm_chain --timeline) record
// side by side in slots of the buffer, [kW4A8TimelineSlots][CTAs][points],
// each launch into the slot set when it was launched (or captured).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qserve::cuda {

// The points, in the order a CTA passes them. A point a kernel form does not
// have (no cluster, no push parts) stays 0.
enum W4A8TimelinePoint : int {
  kTlEntry = 0,         // thread 0, the kernel's first instruction
  kTlFirstWeights,      // the producer's thread 0, the first stage's weight copies issued
  kTlXAfterWait,        // the producer's activation thread, past the PDL wait
  kTlConsumerAfterWait, // the first consumer thread, past the PDL wait
  kTlFirstStage,        // the first consumer thread, its first stage complete (loaded)
  kTlMainLoopDone,      // the first consumer thread, the last wgmma done
  kTlClusterWaitDone,   // the first consumer thread, past the cluster barrier's wait
                        // (cluster reduction: past the warpgroups' barrier)
  kTlPartsDone,         // push forms: an owner's parts arrived; a sender's stores issued
  kTlEnd,               // the first consumer thread, its epilogue done
  // Not timestamps: the first consumer thread's main loop in SM cycles
  // (clock64), summed over its units, register-A W4 tiles only (0 elsewhere).
  kTlLoopCycles,        // from its first stage loaded to its last wgmma done
  kTlLoopBarrierCycles, // of those, waiting on the stages' full barriers
  kTlLoopWgmmaCycles,   // of those, in wgmma.wait_group (a step's wgmmas behind the previous)
  kTlLoopSteps,         // the 128-wide k blocks it stepped through
  kTlSm,                // thread 0: the SM it runs on (%smid)
  kW4A8TimelinePoints
};
inline constexpr int kW4A8TimelineStamps = kTlLoopCycles;  // the points that are timestamps
inline constexpr int kW4A8TimelineCtas = 1024;  // CTAs recorded (blockIdx.x below it)
inline constexpr int kW4A8TimelineSlots = 16;   // launches recorded side by side

// "entry", "first_weights", ... (nullptr outside the range).
const char* w4a8_timeline_point_name(int point);
// Whether this build's kernels record (QSERVE_GEMM_TIMELINE).
bool w4a8_timeline_built();
// On: allocates the buffer once and zeroes it, every slot (on `stream`),
// and sets slot 0; the launches that follow record. Off: the launches do
// not record. Throws kUnsupported where the build does not record.
void set_w4a8_timeline(bool on, cudaStream_t stream);
// The slot the launches that follow record into, 0 .. kW4A8TimelineSlots - 1
// (another throws kInvalidArgument). A launch captured into a CUDA graph keeps
// the slot of its capture in every replay.
void set_w4a8_timeline_slot(int slot);
// Where the next launch records (the set slot), or nullptr while off.
uint64_t* w4a8_timeline_buffer();
// One slot's contents [kW4A8TimelineCtas][kW4A8TimelinePoints] after
// `stream`'s work (synchronizes it); zeros before the first switch on.
std::vector<uint64_t> read_w4a8_timeline(cudaStream_t stream, int slot = 0);
// One line per point of a launch's record (`ctas` CTAs, at most
// kW4A8TimelineCtas counted): of the CTAs that reached it, the median and the
// largest microseconds since the CTA's own entry; first, the entries' spread
// from the earliest; then the phases between points, each the median and
// largest of the CTAs' own differences (PDL wait, fill, main loop, cluster
// wait, parts, epilogue, wait release to end); last, the latest wait release
// to the latest end and the launch's span (earliest entry to latest end);
// then the main loop's split (median per CTA of its barrier waits, wgmma
// waits and the rest - shared loads, unpacking, issue - in ns at its own
// cycles-to-ns ratio, and per block). A point or phase no CTA reached is
// left out.
std::string summarize_w4a8_timeline(const std::vector<uint64_t>& record, int ctas);

}  // namespace qserve::cuda
