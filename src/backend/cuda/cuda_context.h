// The CUDA backend's per-device context: device properties (queried once), a
// non-default stream, the one owner of the cuBLAS and cuBLASLt handles and of
// their workspace, and the device memory pool.
#pragma once

#include <memory>
#include <string>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend/cuda/device_memory.h"

namespace qserve::cuda {

struct DeviceInfo {
  int device = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t smem_per_block_optin = 0;  // bytes a block may opt in to
  size_t smem_per_sm = 0;
  size_t l2_bytes = 0;
  size_t global_mem = 0;
};

// Whether the GEMMs on this device are launched with programmatic dependent
// launch (launch_pdl.cuh): compute capability >= 9.0 and the process-wide
// switch of launch_pdl.h on (QSERVE_PDL=0 turns it off).
bool pdl_enabled(const DeviceInfo& dev);

// How many CUDA devices are visible (0 when there is no driver or GPU).
int device_count();

// Move-only owner of a cudaStream_t (non-blocking w.r.t. the legacy stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaContext {
 public:
  explicit CudaContext(int device = 0);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const DeviceInfo& info() const { return info_; }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublas_lt() const { return cublas_lt_; }
  // cuBLAS(Lt) workspace (32 MiB), owned here.
  void* blas_workspace() const { return blas_workspace_.data(); }
  size_t blas_workspace_bytes() const { return blas_workspace_.size(); }
  DeviceMemoryPool& pool() { return pool_; }

 private:
  DeviceInfo info_;
  Stream stream_;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
  DeviceMemoryPool pool_;
  DeviceBuffer blas_workspace_;
};

}  // namespace qserve::cuda
