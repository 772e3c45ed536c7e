#include "engine/backend_factory.h"

#include "backend/cpu/fp16_activation_backend.h"
#include "backend/cpu/kv_quant_backend.h"
#include "core/error.h"
#ifdef QSERVE_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm_w4a8_overrides.h"
#include "backend/cuda/gemm_w4a8_switches.h"
#endif

namespace qserve {

void check_device_name(const std::string& device) {
  if (device == "cpu" || device == "cpu-fp16" || device == "cuda") return;
  if (device.starts_with("cpu-fp16:")) {
    cpu::parse_fp16_points(device.substr(9));
    return;
  }
  fail(ErrorCode::kUnsupported, "unknown device '{}' (expected cpu, cpu-fp16, cpu-fp16:POINTS or cuda)", device);
}

std::unique_ptr<Backend> make_backend(const std::string& device, std::optional<KvDtype> kv) {
  const bool fp16 = device == "cpu-fp16" || device.starts_with("cpu-fp16:");
  if (device == "cpu" || fp16) {
    std::unique_ptr<Backend> backend = make_cpu_backend(true);
    if (kv && *kv != KvDtype::kFp16) backend = cpu::make_kv_quant_backend(std::move(backend), *kv);
    if (fp16) {
      const cpu::Fp16Points points = device == "cpu-fp16" ? cpu::Fp16Points::all()
                                                          : cpu::parse_fp16_points(device.substr(9));
      backend = cpu::make_fp16_activation_backend(std::move(backend), points);
    }
    return backend;
  }
  if (device == "cuda") {
#ifdef QSERVE_HAVE_CUDA
    return make_cuda_backend(kv.value_or(KvDtype::kFp16));
#else
    fail(ErrorCode::kUnsupported, "device 'cuda': this build has no CUDA backend (configure with the cuda preset)");
#endif
  }
  fail(ErrorCode::kUnsupported, "unknown device '{}' (expected cpu, cpu-fp16, cpu-fp16:POINTS or cuda)", device);
}

#ifdef QSERVE_HAVE_CUDA
void set_w4a8_plan_overrides(const std::string& spec) { cuda::set_w4a8_plan_overrides(spec); }
void check_w4a8_plan_overrides(const std::string& spec) { (void)cuda::parse_w4a8_plan_overrides(spec); }
void set_w4a8_switch(const std::string& assignment) { cuda::set_w4a8_switch(assignment); }
void check_w4a8_switch(const std::string& assignment) { cuda::check_w4a8_switch(assignment); }
void reset_w4a8_switches() { cuda::reset_w4a8_switches(); }
#else
// Without CUDA there is nothing to set: a request for a plan or a form fails.
void set_w4a8_plan_overrides(const std::string& spec) { check_w4a8_plan_overrides(spec); }
void check_w4a8_plan_overrides(const std::string& spec) {
  if (!spec.empty()) fail(ErrorCode::kUnsupported, "W4A8 plan overrides: this build has no CUDA backend");
}
void set_w4a8_switch(const std::string& assignment) { check_w4a8_switch(assignment); }
void check_w4a8_switch(const std::string& assignment) {
  fail(ErrorCode::kUnsupported, "W4A8 switch '{}': this build has no CUDA backend", assignment);
}
void reset_w4a8_switches() {}
#endif

}  // namespace qserve
