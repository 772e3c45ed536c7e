// The PDL switch of launch_pdl.h; the launch helpers are in launch_pdl.cuh.
#include "backend/cuda/launch_pdl.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace qserve::cuda {

namespace {
// QSERVE_PDL=0 in the environment turns it off from the start.
std::atomic<bool> g_programmatic{[] {
  const char* v = std::getenv("QSERVE_PDL");
  return !(v && std::string_view(v) == "0");
}()};
}  // namespace

int device_major() {
  static const int major = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return v;
  }();
  return major;
}

void set_programmatic_launch(bool on) { g_programmatic.store(on, std::memory_order_relaxed); }

bool programmatic_launch() { return g_programmatic.load(std::memory_order_relaxed) && device_major() >= 9; }

bool cluster_launch_supported(const void* kernel) {
  int dev = 0, attr = 0;
  cudaFuncAttributes fa{};
  const bool ok = cudaGetDevice(&dev) == cudaSuccess &&
                  cudaDeviceGetAttribute(&attr, cudaDevAttrClusterLaunch, dev) == cudaSuccess && attr != 0 &&
                  cudaFuncGetAttributes(&fa, kernel) == cudaSuccess && fa.ptxVersion >= 90;
  (void)cudaGetLastError();
  return ok;
}

}  // namespace qserve::cuda
