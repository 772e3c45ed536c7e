// The `qserve` executable: subcommands live in src/cli/.
#include "cli/app.h"

int main(int argc, char** argv) { return qserve::cli::run_main(argc, argv); }
