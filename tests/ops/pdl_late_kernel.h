// A deliberately slow kernel for the programmatic-dependent-launch tests: it
// lets dependents launch at once (griddepcontrol.launch_dependents), sleeps,
// then copies two buffers. A kernel launched after it with PDL that read its
// output or overwrote its input before griddepcontrol.wait would be caught.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace qserve::test {

// After ~sleep_us microseconds: dst_a <- src_a (bytes_a), dst_b <- src_b (bytes_b).
void launch_late_copies(const void* src_a, void* dst_a, size_t bytes_a, const void* src_b, void* dst_b, size_t bytes_b,
                        int sleep_us, cudaStream_t stream);

}  // namespace qserve::test
