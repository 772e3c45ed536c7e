#include "cli/model_path.h"

#include <filesystem>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace qserve::cli {

std::vector<int32_t> tokenize_text(const std::string& model, const std::string& text, bool add_special) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model, ec))
    fail(ErrorCode::kUnsupported, "{}: tokenizing needs a model directory (convert a GGUF file with qserve convert)", model);
  return load_tokenizer(model)->encode(text, add_special);
}

}  // namespace qserve::cli
