#include "cli/model_path.h"

#include <filesystem>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace qserve::cli {

std::vector<int32_t> tokenize_text(const std::string& model, const std::string& text, bool add_special) {
  // A model directory or a .gguf file (its tokenizer is in the metadata): load_tokenizer reads both.
  std::error_code ec;
  const std::filesystem::path p(model);
  if (!std::filesystem::is_directory(p, ec) && !(std::filesystem::is_regular_file(p, ec) && p.extension() == ".gguf"))
    fail(ErrorCode::kNotFound, "{}: not a model directory or a .gguf file", model);
  return load_tokenizer(model)->encode(text, add_special);
}

}  // namespace qserve::cli
