// How many thread-block clusters of each size can be resident at once on this
// GPU (cudaOccupancyMaxActiveClusters), for a kernel shaped like the W4A8
// wgmma tiles: 384 threads (producer + two consumer warpgroups) and enough
// dynamic shared memory for one, two or three CTAs per SM.
//
//   bench_cluster_capacity [--json FILE]
//
// Why it matters: a cluster's CTAs must sit on SMs of one GPC, and the GPCs
// of a 132-SM Hopper part do not all hold the same number of SMs, so fewer
// clusters fit than SMs / size. A split-K cluster plan whose clusters exceed
// this count runs in two waves: on an H100, 30 clusters of 4 at one CTA per SM,
// so 32 output tiles x 4 splits do not fit, which is the o layers' split-4 cliff
// of the H200 sweeps (~1.5x the time of split 3; bench/results/2026-12-05-h100-r37.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_check.h"

namespace {

__global__ void empty_cluster_kernel() {}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("skipped: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  QS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 9) {
    std::printf("skipped: thread-block clusters need sm_90 (this device is sm_%d%d)\n", prop.major, prop.minor);
    return 0;
  }
  constexpr int kThreads = 384, kMaxSize = 16;
  const int per_sm = static_cast<int>(prop.sharedMemPerMultiprocessor);
  QS_CUDA_CHECK(cudaFuncSetAttribute(empty_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(prop.sharedMemPerBlockOptin)));
  QS_CUDA_CHECK(cudaFuncSetAttribute(empty_cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  std::printf("# %s, %d SMs, %d KB shared memory per SM; %d threads a CTA\n", prop.name, prop.multiProcessorCount,
              per_sm / 1024, kThreads);
  std::printf("| CTAs per SM (shared memory a CTA) |");
  for (int size = 1; size <= kMaxSize; ++size) std::printf(" %d |", size);
  std::printf("\n|---|");
  for (int size = 1; size <= kMaxSize; ++size) std::printf("---|");
  std::printf("\n");
  FILE* json = json_path.empty() ? nullptr : std::fopen(json_path.c_str(), "w");
  if (!json_path.empty() && json == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    return 1;
  }
  for (int ctas_per_sm = 1; ctas_per_sm <= 3; ++ctas_per_sm) {
    // Just under 1 / ctas_per_sm of the SM (1 KB a CTA is reserved).
    const int smem = std::min(static_cast<int>(prop.sharedMemPerBlockOptin), per_sm / ctas_per_sm - 2048);
    std::printf("| %d (%d KB) |", ctas_per_sm, smem / 1024);
    if (json) std::fprintf(json, "{\"record\": \"max_active_clusters\", \"device\": \"%s\", \"threads\": %d, "
                           "\"dynamic_smem_bytes\": %d, \"by_cluster_size\": {", prop.name, kThreads, smem);
    for (int size = 1; size <= kMaxSize; ++size) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(size);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = size;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, empty_cluster_kernel, &cfg) != cudaSuccess) {
        (void)cudaGetLastError();
        clusters = -1;  // this size is not supported
      }
      std::printf(" %d |", clusters);
      if (json) std::fprintf(json, "%s\"%d\": %d", size > 1 ? ", " : "", size, clusters);
    }
    std::printf("\n");
    if (json) std::fprintf(json, "}}\n");
  }
  if (json) std::fclose(json);
  return 0;
}
