#include "engine/backend_factory.h"

#include "backend/cpu/fp16_activation_backend.h"
#include "backend/cpu/kv_quant_backend.h"
#include "core/error.h"
#ifdef QSERVE_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace qserve {

std::unique_ptr<Backend> make_backend(const std::string& device, std::optional<KvDtype> kv) {
  if (device == "cpu" || device == "cpu-fp16") {
    std::unique_ptr<Backend> backend = make_cpu_backend(true);
    if (kv && *kv != KvDtype::kFp16) backend = cpu::make_kv_quant_backend(std::move(backend), *kv);
    if (device == "cpu-fp16") backend = cpu::make_fp16_activation_backend(std::move(backend));
    return backend;
  }
  if (device == "cuda") {
#ifdef QSERVE_HAVE_CUDA
    return make_cuda_backend(kv.value_or(KvDtype::kFp16));
#else
    fail(ErrorCode::kUnsupported, "device 'cuda': this build has no CUDA backend (configure with the cuda preset)");
#endif
  }
  fail(ErrorCode::kUnsupported, "unknown device '{}' (expected cpu, cpu-fp16 or cuda)", device);
}

}  // namespace qserve
