// Token sampling on the GPU: greedy, top-k, top-p with per-request seeds,
// with the semantics of backend/cpu/sampling.h (same counter-based draw, same
// thresholds, the kept tokens walked in index order). One block per request.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cpu/sampling.h"

namespace qserve::cuda {

struct SamplingBatch {
  const float* logits = nullptr;         // [batch, vocab] f32
  const SamplingParams* params = nullptr;  // [batch] device
  const uint64_t* steps = nullptr;       // [batch] device: tokens generated so far per request
  int32_t* tokens = nullptr;             // [batch] out
  int32_t batch = 0;
  int32_t vocab = 0;
};

cudaError_t sample_tokens(const SamplingBatch& batch, cudaStream_t stream);

}  // namespace qserve::cuda
