// Device memory: DeviceBuffer (an owning cudaMalloc'd block) and
// DeviceMemoryPool (caches freed blocks by size so that steady-state
// allocation never reaches cudaMalloc; plain cudaMalloc, no managed memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include <cuda_runtime.h>

namespace qserve::cuda {

class DeviceMemoryPool;

// Move-only owner of device memory. From a pool, the block returns to it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // straight cudaMalloc
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t size() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }

  // Synchronous host <-> device copies of the first `bytes` bytes.
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  template <typename T>
  void upload(const std::vector<T>& v) { upload(v.data(), v.size() * sizeof(T)); }

 private:
  friend class DeviceMemoryPool;
  DeviceBuffer(void* ptr, size_t bytes, DeviceMemoryPool* pool) : ptr_(ptr), bytes_(bytes), pool_(pool) {}
  void swap(DeviceBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(pool_, o.pool_);
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  DeviceMemoryPool* pool_ = nullptr;
};

// Size-bucketed cache of device blocks (sizes rounded up to 512 B, or to 2 MiB
// above 1 MiB). Thread-safe. Blocks go back to the device on trim() / destruction.
class DeviceMemoryPool {
 public:
  DeviceMemoryPool() = default;
  ~DeviceMemoryPool();
  DeviceMemoryPool(const DeviceMemoryPool&) = delete;
  DeviceMemoryPool& operator=(const DeviceMemoryPool&) = delete;

  DeviceBuffer allocate(size_t bytes);
  void trim();  // cudaFree every cached block
  size_t bytes_in_use() const { return in_use_; }
  size_t bytes_cached() const { return cached_; }

 private:
  friend class DeviceBuffer;
  void release(void* ptr, size_t bytes);
  static size_t round_size(size_t bytes);

  std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // rounded size -> block
  size_t in_use_ = 0, cached_ = 0;
};

}  // namespace qserve::cuda
