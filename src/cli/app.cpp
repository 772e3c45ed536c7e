#include "cli/app.h"

#include <cstdio>
#include <map>

#include "core/error.h"
#include "core/logging.h"
#include "qserve/version.h"

namespace qserve::cli {
namespace {
std::map<CLI::App*, CommandBody>& bodies() {
  static std::map<CLI::App*, CommandBody> m;
  return m;
}
}  // namespace

void set_command_body(CLI::App* sub, CommandBody body) { bodies()[sub] = std::move(body); }

int run_main(int argc, char** argv) {
  init_logging();
  // Bodies are keyed by subcommand address: forget those of an earlier call
  // (tests run several command lines in one process; a freed App's address can be reused).
  bodies().clear();
  CLI::App app{"qserve: W4A8KV4 LLM serving engine (QServe / QoQ) with a CPU reference backend"};
  app.set_version_flag("--version", std::string("qserve ") + kVersion);
  app.require_subcommand(1);
  add_generate_command(app);
  add_convert_command(app);
  add_quantize_command(app);
  add_eval_command(app);
  add_eval_compare_command(app);
  add_bench_command(app);
  add_serve_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A bad command line: one line on stderr, exit status 2.
    std::fprintf(stderr, "qserve: error: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    for (auto* sub : app.get_subcommands()) {
      for (auto* nested : sub->get_subcommands()) {  // "eval ppl": the innermost body wins
        auto it = bodies().find(nested);
        if (it != bodies().end()) return it->second();
      }
      auto it = bodies().find(sub);
      if (it != bodies().end()) return it->second();
    }
    std::fprintf(stderr, "qserve: error: no subcommand\n");
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "qserve: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qserve: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace qserve::cli
