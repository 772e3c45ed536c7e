// The driver's cuTensorMapEncodeTiled, for the host code that builds TMA
// tensor maps (the W4A8 GEMMs' activations and outputs, the decode kernel's
// KV4 pages). Found once through the runtime's driver entry points, so the
// library does not link against libcuda.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

namespace qserve::cuda {

// Throws (QS_CUDA_CHECK) when the driver has no such entry point.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encode_fn();

}  // namespace qserve::cuda
