// Programmatic dependent launch (PDL, sm_90+): the process-wide switch. The
// attention and fused memory-bound kernels are launched with
// cudaLaunchAttributeProgrammaticStreamSerialization, so the GPU may schedule
// a grid while the previous kernel of the stream is still finishing (its last
// blocks), instead of after it has drained. Each such kernel executes
// griddepcontrol.wait before its first global memory access (so it sees
// everything the previous kernel wrote, and writes nothing the previous kernel
// still reads) and then griddepcontrol.launch_dependents (the next grid may be
// scheduled once all of its blocks have started). A kernel launched without
// the attribute, or following one that never triggers, behaves as before.
//
// On by default on devices of compute capability 9.0 and above; off (plain
// launches) elsewhere, with QSERVE_PDL=0 in the environment, or when turned
// off here (tests and benchmarks compare). The GEMM planners read the same
// switch (cuda_context.h pdl_enabled). Launch helpers: launch_pdl.cuh; device
// side: kernels/pdl.cuh.
#pragma once

namespace qserve::cuda {

// Compute capability major of the current device, read once per process (the
// backend uses one device type); 0 if it cannot be read.
int device_major();

// Process-wide switch (thread-safe); takes effect for launches issued after it.
void set_programmatic_launch(bool on);
// Whether launches issued now use the attribute (switch on and device >= sm_90).
bool programmatic_launch();

// Whether `kernel` (a __global__ function) may be launched in thread block
// clusters here: the device supports cluster launch and the kernel's code was
// built for sm_90 or later (an sm_80 build run on Hopper from PTX must not
// take a cluster path). Not cached: callers keep the answer per kernel.
bool cluster_launch_supported(const void* kernel);

}  // namespace qserve::cuda
