// qserve generate [--model DIR|FILE.gguf] --prompt TEXT ...
#include <cstdio>
#include <string>

#include "cli/app.h"
#include "core/error.h"

namespace qserve::cli {

void add_generate_command(CLI::App& app) {
  auto* sub = app.add_subcommand("generate", "Generate text from a prompt, streamed to stdout");
  auto prompt = std::make_shared<std::string>();
  sub->add_option("--prompt", *prompt, "Prompt text")->required();
  set_command_body(sub, [=]() -> int {
    fail(ErrorCode::kUnsupported, "generate is not implemented yet");
  });
}

}  // namespace qserve::cli
