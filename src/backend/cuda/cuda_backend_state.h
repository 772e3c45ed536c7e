// Internal to the CUDA model backend (cuda_backend*.cpp): the state that the
// Backend and its Linear layers share (device context, cuBLASLt plans, GEMM
// workspaces), device tensors, and pinned staging for host -> device uploads.
// Every operation is ordered on the context's one stream; memory comes from
// the context's pool, so a block freed while kernels that use it are still
// queued is only handed out again to later work on the same stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm_cublas.h"
#include "core/tensor.h"

namespace qserve::cuda {

struct CudaBackendState {
  explicit CudaBackendState(int device) : ctx(device), lt(ctx) {}
  CudaContext ctx;
  CublasLtGemm lt;  // INT8 GEMMs of W8A8 (cuBLASLt, tuned per shape at its first call)

  // Split-K workspace of the W4A8 GEMM: zeroed when (re)allocated, left zeroed by every launch.
  void* w4a8_workspace(size_t bytes);
  // INT32 accumulators of the W8A8 GEMM, [m, n].
  int32_t* w8a8_accumulators(size_t elements);
  // INT8 input of the W8A8 GEMM padded to its m bucket, [m_bucket, k].
  int8_t* w8a8_input(size_t elements);
  // The fp16 scratch of the W4A16 GEMM's large-m path (gemm_w4a16.h), made
  // once at load time by the first W4A16 layer, so the memory plan sees it.
  void* w4a16_scratch(size_t bytes);

  cudaStream_t stream() const { return ctx.stream(); }
  // Bumped by every reallocation of a workspace above (CUDA graphs reference them).
  uint64_t epoch = 0;
  bool capturing = false;  // a step graph is being captured: no allocation allowed

 private:
  DeviceBuffer w4a8_ws_;
  DeviceBuffer w8a8_acc_;
  DeviceBuffer w8a8_in_;
  DeviceBuffer w4a16_scratch_;
};

// A tensor in device memory (zeroed when `zero`), kept alive (with the
// state it came from) by its owner.
Tensor device_tensor(const std::shared_ptr<CudaBackendState>& state, DType dtype, std::vector<int64_t> shape,
                     bool zero = true);
// A device copy of a host tensor, same dtype; synchronous (load time).
Tensor device_copy(const std::shared_ptr<CudaBackendState>& state, const Tensor& host);
// Host values converted to fp16 bits (F32 / F16 / BF16 sources), on the
// host's threads.
std::vector<uint16_t> to_half_bits(const Tensor& host);
// A device fp16 copy of host F32 / F16 / BF16 values or GGUF blocks (widened to F32 on
// the host first); F16 is copied as it is
// (no host copy first). Synchronous (load time).
Tensor device_f16_copy(const std::shared_ptr<CudaBackendState>& state, const Tensor& host);

// Host -> device copies of per-step metadata through a pinned buffer: the
// copy is asynchronous; the buffer is reused only after the previous copy
// from it has completed (an event, normally long done by then).
class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  // A host buffer of at least `bytes`, free to write.
  void* host(size_t bytes);
  // Copies the first `bytes` of host() to `device` on `stream`.
  void upload(void* device, size_t bytes, cudaStream_t stream);

 private:
  void* host_ = nullptr;
  size_t capacity_ = 0;
  cudaEvent_t done_ = nullptr;
  bool pending_ = false;
};

}  // namespace qserve::cuda
