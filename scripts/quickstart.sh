#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies and the default model
# (SmolLM2-135M-Instruct), build, and generate text with it.
#   scripts/quickstart.sh ["prompt"]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh cpu qserve
scripts/install_model.sh
prompt=${1:-"Write a short poem about the sea."}
./build/qserve generate --chat --prompt "$prompt" --max-tokens 128
