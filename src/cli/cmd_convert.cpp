// qserve convert --from gguf FILE.gguf --out DIR
#include <cstdio>
#include <string>

#include "cli/app.h"
#include "core/error.h"

namespace qserve::cli {

void add_convert_command(CLI::App& app) {
  auto* sub = app.add_subcommand("convert", "Convert a checkpoint (GGUF) into a Hugging Face directory");
  auto from = std::make_shared<std::string>("gguf");
  auto input = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--from", *from, "Input format")->check(CLI::IsMember({"gguf"}))->capture_default_str();
  sub->add_option("input", *input, "Input file (.gguf)")->required();
  sub->add_option("--out", *out, "Output directory")->required();
  set_command_body(sub, [=]() -> int {
    fail(ErrorCode::kUnsupported, "convert is not implemented yet");
  });
}

}  // namespace qserve::cli
