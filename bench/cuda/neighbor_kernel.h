// A stand-in for a model's other kernels in the GEMM benchmark (bench_gemm
// --neighbor-us): one block per SM that holds most of the SM's shared memory
// for a set time, so that the next kernel's CTAs cannot start on any SM until
// it leaves, as after attention or a fused norm kernel, instead of starting
// beside the previous launch of the same GEMM (which back-to-back launches
// under programmatic dependent launch allow).
#pragma once

#include <cuda_runtime.h>

namespace qserve::bench {

// Launches the stand-in on `stream`: `sms` blocks that each spin for `us`
// microseconds with `smem_bytes` of dynamic shared memory reserved. With
// `trigger`, each block first allows its dependents to launch (as the
// engine's kernels do), so a PDL-launched GEMM is scheduled early but its
// CTAs wait for the SMs.
void launch_neighbor(cudaStream_t stream, int sms, double us, int smem_bytes, bool trigger);

// The cold neighbor (bench_gemm --neighbor-mb): as launch_neighbor, but each
// block reads its share of `bytes` (a multiple of 16) from `buf` instead of
// spinning (four 16-B loads in flight a thread). With `bytes` well past the
// L2 (60 MB on the H200), the next kernel finds neither its weights nor its
// own instructions in L2, as in a model, where the other layers' weights
// stream through L2 between two launches of one GEMM.
void launch_neighbor_reader(cudaStream_t stream, int sms, const void* buf, size_t bytes, int smem_bytes,
                            bool trigger);

// The code neighbor (bench_gemm --neighbor-code): as launch_neighbor, but each
// block runs once through kNeighborCodeSteps steps of straight-line code
// (distinct immediates, no loop), so that the next kernel finds none of its
// own instructions in the SM's instruction caches, as in a model, where other
// kernels (attention, norms, the other GEMMs) run on the same SMs between two
// launches of one GEMM. (Its code is in L2 after the first launch: combined
// with an L2 flush it would be --neighbor-mb's job as well; they exclude each
// other, so this one isolates the SM-side caches.)
inline constexpr int kNeighborCodeSteps = 2048;  // 4 chains of 3 instructions a step: ~24K instructions, ~390 KB
void launch_neighbor_code(cudaStream_t stream, int sms, int smem_bytes, bool trigger);

}  // namespace qserve::bench
