#include "backend/cuda/device_memory.h"

#include "backend/cuda/cuda_check.h"

namespace qserve::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) QS_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  if (pool_) {
    pool_->release(ptr_, bytes_);
  } else {
    cudaFree(ptr_);  // no check: destructors may run during error unwinding
  }
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  if (!bytes) return;
  QS_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before its last DMA lands, and
  // the backend's kernels run on non-blocking streams, which do not wait for
  // the legacy default stream: wait here, so that any later launch sees the data.
  QS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  if (bytes) QS_CUDA_CHECK(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
}

size_t DeviceMemoryPool::round_size(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20;
  if (bytes <= (size_t{1} << 20)) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

DeviceBuffer DeviceMemoryPool::allocate(size_t bytes) {
  if (bytes == 0) return {};
  const size_t rounded = round_size(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(rounded);
    if (it != free_.end()) {
      void* ptr = it->second;
      free_.erase(it);
      cached_ -= rounded;
      in_use_ += rounded;
      return DeviceBuffer(ptr, rounded, this);
    }
  }
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, rounded) != cudaSuccess) {  // out of memory: give the cache back, try again
    cudaGetLastError();
    trim();
    QS_CUDA_CHECK(cudaMalloc(&ptr, rounded));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  in_use_ += rounded;
  return DeviceBuffer(ptr, rounded, this);
}

void DeviceMemoryPool::release(void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.emplace(bytes, ptr);
  in_use_ -= bytes;
  cached_ += bytes;
}

void DeviceMemoryPool::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, ptr] : free_) cudaFree(ptr);
  free_.clear();
  cached_ = 0;
}

DeviceMemoryPool::~DeviceMemoryPool() { trim(); }

}  // namespace qserve::cuda
