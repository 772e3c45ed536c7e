// The qserve command line: one CLI11 app, one file per subcommand
// (cmd_<name>.cpp, each exposing add_<name>_command).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace qserve::cli {

// Parses argv, runs the chosen subcommand, maps errors to exit codes:
// 0 ok, 1 qserve::Error (one line on stderr), 2 bad command line.
int run_main(int argc, char** argv);

// A subcommand registers its flags and sets `run` to its body; the body returns an exit code.
using CommandBody = std::function<int()>;
void set_command_body(CLI::App* sub, CommandBody body);

// Subcommands (src/cli/cmd_*.cpp).
void add_generate_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_eval_compare_command(CLI::App& app);  // "eval compare", after add_eval_command
void add_bench_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace qserve::cli
