#!/usr/bin/env bash
# Configures and builds a preset (default: cpu, which leaves build/qserve).
#   scripts/build.sh [cpu|cuda|asan] [targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-cpu}
shift || true
dir=build
case "$preset" in
  cpu) dir=build ;;
  cuda) dir=build-cuda ;;
  asan) dir=build-asan ;;
  *) echo "build.sh: unknown preset $preset" >&2; exit 2 ;;
esac
if [ ! -f "$dir/build.ninja" ]; then cmake --preset "$preset" >/dev/null; fi
jobs=${QSERVE_BUILD_JOBS:-$(nproc)}
if [ $# -gt 0 ]; then
  cmake --build "$dir" -j "$jobs" --target "$@"
else
  cmake --build "$dir" -j "$jobs"
fi
