#!/usr/bin/env bash
# The test suite, from a fresh machine: installs the dependencies, builds the
# cpu and asan presets, runs ctest on both (asan: the reader and tokenizer
# tests), a short libFuzzer run of each target (QSERVE_FUZZ_SECONDS each: the
# request parser, tokenizers, chat templates, model files; scripts/fuzz.sh),
# then the Python end-to-end tests. .ci/run calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --test
scripts/install_model.sh
scripts/build.sh cpu
ctest --test-dir build --output-on-failure -j "$(nproc)"
scripts/build.sh asan qserve_unit_tests
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -R "${QSERVE_ASAN_TESTS:-Safetensors|Gguf|Checkpoint|Tokenizer|Bpe|SentencePiece|Detok|Config|ChatTemplate|Server}"
QSERVE_FUZZ_SEED="${QSERVE_FUZZ_SEED:-1}" scripts/fuzz.sh "${QSERVE_FUZZ_SECONDS:-30}"
if compgen -G "tests/e2e/test_*.py" >/dev/null; then
  python3 -m pytest -q tests/e2e
fi
