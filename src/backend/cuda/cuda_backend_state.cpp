#include "backend/cuda/cuda_backend_state.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace qserve::cuda {
namespace {

// The owner of a device tensor: the state outlives the buffer (members are
// destroyed in reverse order), so the pool the buffer returns to still exists.
struct DeviceBlock {
  std::shared_ptr<CudaBackendState> state;
  DeviceBuffer buffer;
};

}  // namespace

void* CudaBackendState::w4a8_workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (w4a8_ws_.size() < bytes) {
    QS_CHECK(!capturing) << "W4A8 workspace growth while capturing a step graph";
    ++epoch;
    w4a8_ws_ = ctx.pool().allocate(std::max(bytes, 2 * w4a8_ws_.size()));
    QS_CUDA_CHECK(cudaMemsetAsync(w4a8_ws_.data(), 0, w4a8_ws_.size(), stream()));
  }
  return w4a8_ws_.data();
}

int32_t* CudaBackendState::w8a8_accumulators(size_t elements) {
  const size_t bytes = elements * sizeof(int32_t);
  if (w8a8_acc_.size() < bytes) QS_CHECK(!capturing) << "W8A8 workspace growth while capturing a step graph";
  if (w8a8_acc_.size() < bytes) ++epoch, w8a8_acc_ = ctx.pool().allocate(std::max(bytes, 2 * w8a8_acc_.size()));
  return w8a8_acc_.as<int32_t>();
}

int8_t* CudaBackendState::w8a8_input(size_t elements) {
  if (w8a8_in_.size() < elements) QS_CHECK(!capturing) << "W8A8 workspace growth while capturing a step graph";
  if (w8a8_in_.size() < elements) ++epoch, w8a8_in_ = ctx.pool().allocate(std::max(elements, 2 * w8a8_in_.size()));
  return w8a8_in_.as<int8_t>();
}

void* CudaBackendState::w4a16_scratch(size_t bytes) {
  if (w4a16_scratch_.size() < bytes) QS_CHECK(!capturing) << "W4A16 scratch growth while capturing a step graph";
  if (w4a16_scratch_.size() < bytes) ++epoch, w4a16_scratch_ = ctx.pool().allocate(bytes);
  return w4a16_scratch_.data();
}

Tensor device_tensor(const std::shared_ptr<CudaBackendState>& state, DType dtype, std::vector<int64_t> shape,
                     bool zero) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    QS_CHECK(d >= 0) << "negative dimension";
    numel *= d;
  }
  const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
  if (bytes == 0) return Tensor(dtype, std::move(shape), nullptr);
  QS_CHECK(!state->capturing) << "device allocation while capturing a step graph";
  auto block = std::make_shared<DeviceBlock>();
  block->state = state;
  block->buffer = state->ctx.pool().allocate(bytes);
  if (zero) QS_CUDA_CHECK(cudaMemsetAsync(block->buffer.data(), 0, bytes, state->stream()));
  void* data = block->buffer.data();
  return Tensor(dtype, std::move(shape), data, std::shared_ptr<void>(block, data));
}

Tensor device_copy(const std::shared_ptr<CudaBackendState>& state, const Tensor& host) {
  Tensor t = device_tensor(state, host.dtype(), host.shape(), /*zero=*/false);
  if (t.nbytes() == 0) return t;
  QS_CUDA_CHECK(cudaMemcpyAsync(t.data(), host.data(), t.nbytes(), cudaMemcpyHostToDevice, state->stream()));
  QS_CUDA_CHECK(cudaStreamSynchronize(state->stream()));
  return t;
}

std::vector<uint16_t> to_half_bits(const Tensor& host) {
  const int64_t n = host.numel();
  std::vector<uint16_t> out(static_cast<size_t>(n));
  const DType dtype = host.dtype();
  QS_CHECK(dtype == DType::kF16 || dtype == DType::kF32 || dtype == DType::kBF16)
      << "expected F32 / F16 / BF16 values, got " << host.describe();
  // A large tensor (an embedding, the lm_head: ~0.5-1 G values) in chunks
  // across the host's threads.
  ThreadPool::global().parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        switch (dtype) {
          case DType::kF16:
            std::memcpy(out.data() + begin, host.data_as<uint16_t>() + begin, (end - begin) * sizeof(uint16_t));
            break;
          case DType::kF32:
            for (int64_t i = begin; i < end; ++i) out[i] = float_to_half(host.data_as<float>()[i]);
            break;
          default:
            for (int64_t i = begin; i < end; ++i) out[i] = float_to_half(bf16_to_float(host.data_as<uint16_t>()[i]));
            break;
        }
      },
      int64_t{1} << 16);
  return out;
}

Tensor device_f16_copy(const std::shared_ptr<CudaBackendState>& state, const Tensor& host) {
  if (host.dtype() == DType::kF16) return device_copy(state, host);
  if (dtype_is_blocked(host.dtype())) return device_f16_copy(state, to_f32(host));  // GGUF blocks: widened on the host
  std::vector<uint16_t> bits = to_half_bits(host);
  return device_copy(state, Tensor(DType::kF16, host.shape(), bits.data()));
}

PinnedStaging::~PinnedStaging() {
  if (done_) {
    cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
  }
  if (host_) cudaFreeHost(host_);
}

void* PinnedStaging::host(size_t bytes) {
  if (pending_) {
    QS_CUDA_CHECK(cudaEventSynchronize(done_));  // the previous step's copy: long finished in practice
    pending_ = false;
  }
  if (capacity_ < bytes) {
    if (host_) QS_CUDA_CHECK(cudaFreeHost(host_));
    capacity_ = std::max<size_t>(bytes, 2 * capacity_);
    QS_CUDA_CHECK(cudaMallocHost(&host_, capacity_));
  }
  return host_;
}

void PinnedStaging::upload(void* device, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  if (!done_) QS_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  QS_CUDA_CHECK(cudaMemcpyAsync(device, host_, bytes, cudaMemcpyHostToDevice, stream));
  QS_CUDA_CHECK(cudaEventRecord(done_, stream));
  pending_ = true;
}

}  // namespace qserve::cuda
