// Holding the GPU while the host queues a timed batch of launches (nvbench's
// "blocking kernel"): a one-thread kernel spins on a flag in pinned host
// memory until the host, having queued the batch and its end event, releases
// it. The batch then runs back to back from its first launch, and its time is
// the GPU's alone. Without it the start event fires on an idle GPU and the
// first launch arrives one host submission later (a few us for a launch,
// more for a graph): a constant per batch that weighs more on a short kernel's
// time than on a long one's, so it biases ratios between them.
#pragma once

#include <cuda_runtime.h>

namespace qserve::bench {

// false: time as before 2026-12-02 (no hold; `--host-paced` in the benches).
inline bool queued_timing = true;

// Queues on `stream` a kernel that spins until release_gpu() (or about a
// second: a host that never releases it must not hang the GPU). One hold at a
// time per process. No-ops when !queued_timing.
void hold_gpu(cudaStream_t stream);
void release_gpu();

}  // namespace qserve::bench
