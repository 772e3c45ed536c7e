#include "model/gguf_checkpoint.h"

#include "core/error.h"

namespace qserve {

std::shared_ptr<Checkpoint> open_gguf_checkpoint(const std::string& path) {
  fail(ErrorCode::kUnsupported, "{}: GGUF checkpoints are not supported yet", path);
}

}  // namespace qserve
