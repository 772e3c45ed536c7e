#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer + UBSan) and runs
# the request-parser fuzzer for SECONDS (default 30) on the committed seeds.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
if ! command -v clang++ >/dev/null; then echo "fuzz.sh: skipped: clang++ not found" >&2; exit 0; fi
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DQSERVE_FUZZ=ON -DQSERVE_BUILD_TESTS=OFF -DQSERVE_BUILD_BENCH=OFF >/dev/null
fi
cmake --build build-fuzz -j "${QSERVE_BUILD_JOBS:-$(nproc)}" --target fuzz_request_parser
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/request_parser/* "$work"/
build-fuzz/tests/fuzz/fuzz_request_parser "$work" -max_total_time="$secs" -max_len=4096 -timeout=10 \
  -print_final_stats=1 2>&1 | tail -n 15
