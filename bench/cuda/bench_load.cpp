// Where the time of putting a model's W4A8 linears on the GPU goes, phase by
// phase (a dummy load logs only its whole backend share, with
// QSERVE_LOG_LEVEL=info: docs/serving-benchmark.md). For a named shape's
// block linears (dummy weights: no checkpoint read), in the engine's order
// and with its fusions (q/k/v and gate/up stacked):
//   generate  the canonical weights (engine/dummy_weights.h)
//   stack     concat_output_channels of q/k/v and gate/up
//   repack    the compute-order weights (quant/w4a8_repack.h)
//   level2    the g128 level-2 words
//   alloc     cudaMalloc of the repacked weights
// (and first the CUDA context's creation, which a model load also pays)
//   copy      their host-to-device copy from the repacked (pageable) vectors
// then the same layers through upload_w4a8 whole (the backend's path: the
// streamed repack and copy of backend/cuda/repack_upload.h, and the scales),
// and the copy ceiling: the largest layer's bytes
// from pinned host memory.
//
//   bench_load [--arch llama-3-8b] [--kind g128|pc] [--layers N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm_w4a8.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/dummy_arch.h"
#include "engine/dummy_weights.h"
#include "quant/quant_linear.h"
#include "quant/w4a8_repack.h"
#include "../bench_args.h"

namespace qserve {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Phases {
  double generate = 0, stack = 0, repack = 0, level2 = 0, alloc = 0, copy = 0, upload_w4a8 = 0;
  double bytes = 0;  // repacked weight bytes copied
};

int run(int argc, char** argv) {
  std::string arch = "llama-3-8b", kind = "g128";
  int64_t layers = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return bench::next_arg(argc, argv, i); };
    if (a == "--arch") arch = next();
    else if (a == "--kind") kind = next();
    else if (a == "--layers") layers = std::stoll(next());
    else fail(ErrorCode::kInvalidArgument, "unknown argument {} (bench_load [--arch A] [--kind g128|pc] [--layers N])", a);
  }
  if (kind != "g128" && kind != "pc") fail(ErrorCode::kInvalidArgument, "--kind is g128 or pc, not {}", kind);
  const ModelConfig c = dummy_arch_config(arch);
  if (layers < 0 || layers > c.num_layers) layers = c.num_layers;
  const quant::WeightFormat format = kind == "g128" ? quant::WeightFormat::kW4G128 : quant::WeightFormat::kW4PerChannel;
  Clock::time_point context_start = Clock::now();
  QS_CUDA_CHECK(cudaFree(nullptr));  // the context (and, unless loading lazily, every kernel's module)
  const double context_s = since(context_start);

  // [out, in] of each part, fused groups together: q/k/v, o, gate/up, down.
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> groups = {
      {{c.q_dim(), c.hidden_size}, {c.kv_dim(), c.hidden_size}, {c.kv_dim(), c.hidden_size}},
      {{c.hidden_size, c.q_dim()}},
      {{c.intermediate_size, c.hidden_size}, {c.intermediate_size, c.hidden_size}},
      {{c.hidden_size, c.intermediate_size}}};
  Phases t;
  size_t largest = 0;
  for (int64_t l = 0; l < layers; ++l)
    for (size_t g = 0; g < groups.size(); ++g) {
      Clock::time_point s = Clock::now();
      std::vector<quant::QuantizedLinear> parts;
      for (size_t p = 0; p < groups[g].size(); ++p)
        parts.push_back(random_quantized_linear(format, groups[g][p].first, groups[g][p].second, 128,
                                                dummy_tensor_seed(0, l, std::to_string(g * 4 + p).c_str())));
      t.generate += since(s);
      s = Clock::now();
      const quant::QuantizedLinear q = parts.size() > 1 ? quant::concat_output_channels(std::move(parts)) : std::move(parts[0]);
      t.stack += since(s);
      const std::vector<uint8_t>& canonical = format == quant::WeightFormat::kW4G128 ? q.g128.qweight : q.w4pc.qweight;
      s = Clock::now();
      const std::vector<uint8_t> packed = quant::repack_w4_mma(canonical.data(), q.n, q.k);
      t.repack += since(s);
      if (format == quant::WeightFormat::kW4G128) {
        s = Clock::now();
        const std::vector<uint32_t> l2 = quant::repack_level2_mma(q.g128.s2.data(), q.g128.zero.data(), q.n, q.g128.groups());
        t.level2 += since(s);
      }
      s = Clock::now();
      cuda::DeviceBuffer d(packed.size());
      t.alloc += since(s);
      s = Clock::now();
      d.upload(packed);
      t.copy += since(s);
      t.bytes += static_cast<double>(packed.size());
      largest = std::max(largest, packed.size());
      s = Clock::now();
      const cuda::W4A8DeviceWeights w =
          format == quant::WeightFormat::kW4G128 ? cuda::upload_w4a8(q.g128) : cuda::upload_w4a8(q.w4pc);
      t.upload_w4a8 += since(s);
    }

  // The copy ceiling: the largest layer from pinned memory (best of 5).
  void* pinned = nullptr;
  QS_CUDA_CHECK(cudaMallocHost(&pinned, largest));
  std::memset(pinned, 1, largest);
  cuda::DeviceBuffer d(largest);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const Clock::time_point s = Clock::now();
    QS_CUDA_CHECK(cudaMemcpy(d.data(), pinned, largest, cudaMemcpyHostToDevice));
    best = std::min(best, since(s));
  }
  QS_CUDA_CHECK(cudaFreeHost(pinned));

  std::printf("%s %s, %lld of %lld layers, %d host threads (hardware %u)\n", arch.c_str(), kind.c_str(),
              static_cast<long long>(layers), static_cast<long long>(c.num_layers), ThreadPool::global().num_threads(),
              std::thread::hardware_concurrency());
  std::printf("| phase | s |\n|---|---|\n");
  std::printf("| CUDA context (CUDA_MODULE_LOADING=%s) | %.3f |\n",
              std::getenv("CUDA_MODULE_LOADING") ? std::getenv("CUDA_MODULE_LOADING") : "unset", context_s);
  std::printf("| generate | %.3f |\n| stack (q/k/v, gate/up) | %.3f |\n| repack | %.3f |\n| level2 | %.3f |\n", t.generate,
              t.stack, t.repack, t.level2);
  std::printf("| alloc | %.3f |\n| copy (pageable, %.2f GB: %.1f GB/s) | %.3f |\n", t.alloc, t.bytes / 1e9,
              t.bytes / 1e9 / t.copy, t.copy);
  std::printf("| upload_w4a8 whole (streamed repack and copy, scales) | %.3f |\n", t.upload_w4a8);
  std::printf("pinned copy ceiling: %.1f GB/s (%.1f MB)\n", static_cast<double>(largest) / 1e9 / best,
              static_cast<double>(largest) / 1e6);
  return 0;
}

}  // namespace
}  // namespace qserve

int main(int argc, char** argv) {
  try {
    return qserve::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_load: %s\n", e.what());
    return 1;
  }
}
