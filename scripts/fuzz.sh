#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer + UBSan) and runs
# each for SECONDS (default 30) from its seeds: the request parser, the
# tokenizers, chat templates, GGUF and safetensors files, config.json
# (tests/fuzz/CMakeLists.txt).
#   scripts/fuzz.sh [SECONDS] [TARGET ...]      (TARGET: request_parser, tokenizer, ...)
# A crash leaves its input in build-fuzz/crashes/TARGET/ and fails the script.
# Nothing is kept between runs but the seeds: each run starts from them.
# QSERVE_FUZZ_SEED=N fixes libFuzzer's random seed (the test suite uses 1, so
# that a run explores the same inputs on every machine, as far as time allows).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(request_parser tokenizer tokenizer_json tokenizer_config chat_template gguf safetensors model_config)
if ! command -v clang++ >/dev/null; then echo "fuzz.sh: skipped: clang++ not found" >&2; exit 0; fi
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DQSERVE_FUZZ=ON -DQSERVE_BUILD_TESTS=OFF -DQSERVE_BUILD_BENCH=OFF >/dev/null
fi
cmake --build build-fuzz -j "${QSERVE_BUILD_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

# seeds of each target (copied: libFuzzer adds what it finds to its corpus folder)
seeds() {
  case "$1" in
    request_parser) echo tests/fuzz/corpus/request_parser/* ;;
    tokenizer) echo tests/fuzz/corpus/tokenizer/* ;;
    tokenizer_json) echo tests/data/tokenizer/*/tokenizer.json ;;
    tokenizer_config) echo tests/fuzz/corpus/tokenizer_config/* ;;
    chat_template) echo tests/data/chat_templates/*.jinja ;;
    gguf) echo tests/data/gguf/*.gguf tests/fuzz/corpus/gguf/*.gguf ;;
    safetensors) echo tests/data/gguf/*.safetensors tests/data/models/*/model.safetensors ;;
    model_config) echo tests/fuzz/corpus/model_config/* tests/data/models/*/config.json ;;
    *) echo "fuzz.sh: unknown target $1" >&2; exit 2 ;;
  esac
}
max_len() {
  case "$1" in
    gguf | safetensors) echo 131072 ;;
    chat_template | tokenizer_config) echo 16384 ;;
    tokenizer_json) echo 32768 ;;
    *) echo 4096 ;;
  esac
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for t in "${targets[@]}"; do
  mkdir -p "$work/$t" "build-fuzz/crashes/$t"
  for f in $(seeds "$t"); do cp "$f" "$work/$t/${f//\//_}"; done  # (several seeds are model.safetensors)
  echo "== fuzz_$t: ${secs} s"
  if ! build-fuzz/tests/fuzz/fuzz_"$t" "$work/$t" -max_total_time="$secs" -max_len="$(max_len "$t")" \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="build-fuzz/crashes/$t/" -print_final_stats=1 \
      ${QSERVE_FUZZ_SEED:+-seed="$QSERVE_FUZZ_SEED"} \
      > "$work/$t.log" 2>&1; then
    status=1
    echo "fuzz_$t FAILED (input in build-fuzz/crashes/$t/):"
  fi
  tail -n 15 "$work/$t.log"
done
exit $status
