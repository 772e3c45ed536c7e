// The default model: SmolLM2-135M-Instruct, converted by scripts/install_model.sh
// into ${QSERVE_HOME:-$HOME/.cache/qserve}/models/SmolLM2-135M-Instruct.
#pragma once

#include <string>

namespace qserve {

// The directory scripts/install_model.sh converts the default model into
// (whether or not it exists).
std::string default_model_dir();

// The model a subcommand uses: `flag_value` if given, else $QSERVE_MODEL, else
// the default model's directory if installed, else Error(kNotFound) telling
// the user to run scripts/install_model.sh.
std::string resolve_model_path(const std::string& flag_value);

}  // namespace qserve
