// Engine::create(config): the model named by the config on its backend.
#include "core/error.h"
#include "qserve/engine.h"

namespace qserve {

std::unique_ptr<Engine> Engine::create(const EngineConfig& config) {
  fail(ErrorCode::kUnsupported, "loading model '{}' on '{}': the model runner for real checkpoints is not built yet",
       config.model, config.device);
}

}  // namespace qserve
