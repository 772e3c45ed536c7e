#include "model/default_model.h"

#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace qserve {

std::string default_model_dir() {
  std::string home;
  if (const char* h = std::getenv("QSERVE_HOME"); h != nullptr && *h != '\0') {
    home = h;
  } else if (const char* user = std::getenv("HOME"); user != nullptr && *user != '\0') {
    home = std::string(user) + "/.cache/qserve";
  } else {
    home = ".cache/qserve";
  }
  return home + "/models/SmolLM2-135M-Instruct";
}

std::string resolve_model_path(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("QSERVE_MODEL"); env != nullptr && *env != '\0') return env;
  const std::string dir = default_model_dir();
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::filesystem::path(dir) / "config.json", ec)) return dir;
  fail(ErrorCode::kNotFound, "no --model given and the default model is not installed: run scripts/install_model.sh");
}

}  // namespace qserve
