#include "engine/backend_factory.h"

#include "backend/cpu/kv_quant_backend.h"
#include "core/error.h"

namespace qserve {

std::unique_ptr<Backend> make_backend(const std::string& device, std::optional<KvDtype> kv) {
  if (device == "cpu") {
    std::unique_ptr<Backend> backend = make_cpu_backend(true);
    if (kv && *kv != KvDtype::kFp16) backend = cpu::make_kv_quant_backend(std::move(backend), *kv);
    return backend;
  }
  if (device == "cuda") {
    fail(ErrorCode::kUnsupported, "device 'cuda': the CUDA model backend is not built yet (only the CUDA kernels are)");
  }
  fail(ErrorCode::kUnsupported, "unknown device '{}' (expected cpu or cuda)", device);
}

}  // namespace qserve
