#!/usr/bin/env bash
# Installs what qserve needs on a fresh Debian 12 machine: the C++ build
# dependencies (Debian's -dev packages) and the Python tooling for tests and
# reference dumps (PyPI). Idempotent: re-running it only checks.
#   scripts/install_deps.sh            C++ deps + Python tooling
#   scripts/install_deps.sh --torch    also torch + transformers (reference dumps, convert round-trip test)
#   scripts/install_deps.sh --test     everything the test suite needs: --torch, plus clang's
#                                      libFuzzer and chromium (chat-page test)
set -euo pipefail

want_torch=0
want_test_tools=0
for arg in "$@"; do
  case "$arg" in
    --torch) want_torch=1 ;;
    --test) want_torch=1; want_test_tools=1 ;;
    *) echo "install_deps.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libfmt-dev libspdlog-dev
  libsentencepiece-dev libre2-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-pip
)
if [ $want_test_tools -eq 1 ]; then
  APT_PACKAGES+=(
    clang libclang-rt-14-dev  # libFuzzer (scripts/fuzz.sh)
    chromium                  # headless browser for the chat-page test (tests/e2e/test_server_chat_page.py)
  )
fi
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
PIP_PACKAGES=(numpy tokenizers safetensors gguf pytest openai jinja2 sentencepiece)
if [ $want_torch -eq 1 ]; then PIP_PACKAGES+=(torch transformers accelerate); fi  # accelerate: transformers needs it to load GGUF files
need_pip=0
for p in "${PIP_PACKAGES[@]}"; do
  $PY -c "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('$p') else 1)" 2>/dev/null || need_pip=1
done
if [ $need_pip -eq 1 ]; then
  echo "install_deps: pip install ${PIP_PACKAGES[*]}"
  $PY -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}" 2>&1 | grep -v "Running pip as the 'root' user" || true
fi
echo "install_deps: ok"
