#include "cli/model_path.h"

#include "core/error.h"

namespace qserve::cli {

std::string resolve_model_path(const std::string& arg) {
  if (arg.empty()) fail(ErrorCode::kNotFound, "no --model given (and no default model resolution yet)");
  return arg;
}

std::vector<int32_t> tokenize_text(const std::string& model, const std::string&, bool) {
  fail(ErrorCode::kUnsupported, "{}: tokenizers are not available yet", model);
}

}  // namespace qserve::cli
