// The CUDA model backend: the Backend interface (backend/backend.h) on one
// GPU, with fp16 activations, packed paged KV pages (KV4 / KV8 / FP16,
// docs/kv-cache-layout.md) and the kernels of src/backend/cuda/. Design and
// numerics: docs/cuda-backend.md.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "quant/kv_format.h"

namespace qserve {

// kv: the format of the KV pages (kFp16 for the fp16 / w4a16 precisions).
// Throws Error(kUnsupported) when no CUDA device is visible.
std::unique_ptr<Backend> make_cuda_backend(KvDtype kv, int device = 0);

}  // namespace qserve
