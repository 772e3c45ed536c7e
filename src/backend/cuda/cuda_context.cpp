#include "backend/cuda/cuda_context.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch_pdl.h"

namespace qserve::cuda {

bool pdl_enabled(const DeviceInfo& dev) { return programmatic_launch() && dev.cc_major >= 9; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

Stream::Stream() { QS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
void Stream::synchronize() const { QS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

namespace {
DeviceInfo query_device(int device) {
  QS_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  QS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.device = device;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  info.smem_per_sm = prop.sharedMemPerMultiprocessor;
  info.l2_bytes = prop.l2CacheSize;
  info.global_mem = prop.totalGlobalMem;
  return info;
}
}  // namespace

CudaContext::CudaContext(int device) : info_(query_device(device)) {
  QS_CUDA_CHECK(cublasCreate(&cublas_));
  QS_CUDA_CHECK(cublasSetStream(cublas_, stream_.get()));
  QS_CUDA_CHECK(cublasLtCreate(&cublas_lt_));
  blas_workspace_ = DeviceBuffer(size_t{32} << 20);
  QS_CUDA_CHECK(cublasSetWorkspace(cublas_, blas_workspace_.data(), blas_workspace_.size()));
}

CudaContext::~CudaContext() {
  if (cublas_lt_) cublasLtDestroy(cublas_lt_);
  if (cublas_) cublasDestroy(cublas_);
}

}  // namespace qserve::cuda
