#!/usr/bin/env bash
# The serving throughput table (docs/serving-benchmark.md): every arch x
# precision x memory budget with `qserve bench throughput --load-format dummy`,
# a headline pair at a larger batch, and the Hugging Face peer; JSON lines and
# a markdown table in OUT_DIR.
#
#   bench/run_throughput_table.sh [--dry-run] QSERVE_BINARY OUT_DIR
#
# Writes OUT_DIR/throughput.jsonl (the table), headline.jsonl, peer.jsonl,
# log.txt and table.md.
#
# Order: the headline pair (the issue's targets), the peer, then the table, so
# that a run cut short keeps the most important lines (all of them are
# appended to OUT_DIR as they come).
# Each (arch, precision) is one process: the model is made once and run under
# every budget of $BUDGETS (one full batch each: --num-prompts 0, the largest
# batch the budget's KV cache holds, capped by $MAX_SEQS). Settings (environment):
#   DEVICE=cuda  ARCHS="llama-3-8b llama-2-7b llama-2-70b"
#   PRECISIONS="fp16 w8a8kv8 w4a16 w4a8kv8 w4a8kv4 w4a8kv4-chn"
#   BUDGETS="0,80GB,48GB" (0: the device's own memory)  UTIL=0.9
#   INPUT_LEN=1024 OUTPUT_LEN=512  MAX_SEQS=64 (70B shapes: MAX_SEQS_70B=8)
#   MAX_BATCHED_TOKENS=8192  HEADLINE_ARCH=llama-3-8b HEADLINE_SEQS=512 (0: none)
#   HEADLINE_PRECISIONS="fp16 w4a8kv4"
#   PEER=1 PEER_ARCHS="llama-3-8b llama-2-7b" PEER_ARGS="" PYTHON=python3
#   CELL_TIMEOUT=300 (seconds per process)  EXTRA_ARGS="" (to every qserve run)
#   QSERVE_LIBS=DIR: shared libraries for the qserve binary only (a bundled
#   libstdc++ must not reach the peer's Python / torch)
#   SKIP="" (arch:precision pairs not run, e.g. "llama-2-70b:fp16")
set -uo pipefail

DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; shift; fi
if [[ $# -ne 2 ]]; then
  sed -n '2,20p' "$0" >&2
  exit 2
fi
QSERVE=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
DEVICE=${DEVICE:-cuda}
ARCHS=${ARCHS:-llama-3-8b llama-2-7b llama-2-70b}
PRECISIONS=${PRECISIONS:-fp16 w8a8kv8 w4a16 w4a8kv8 w4a8kv4 w4a8kv4-chn}
BUDGETS=${BUDGETS:-0,80GB,48GB}
UTIL=${UTIL:-0.9}
INPUT_LEN=${INPUT_LEN:-1024}
OUTPUT_LEN=${OUTPUT_LEN:-512}
MAX_SEQS=${MAX_SEQS:-64}
MAX_SEQS_70B=${MAX_SEQS_70B:-8}
MAX_BATCHED_TOKENS=${MAX_BATCHED_TOKENS:-8192}
HEADLINE_ARCH=${HEADLINE_ARCH:-llama-3-8b}
HEADLINE_SEQS=${HEADLINE_SEQS:-512}
HEADLINE_PRECISIONS=${HEADLINE_PRECISIONS:-fp16 w4a8kv4}
PEER=${PEER:-1}
PEER_ARCHS=${PEER_ARCHS:-llama-3-8b llama-2-7b}
PEER_ARGS=${PEER_ARGS:-}
PYTHON=${PYTHON:-python3}
CELL_TIMEOUT=${CELL_TIMEOUT:-300}
EXTRA_ARGS=${EXTRA_ARGS:-}
SKIP=${SKIP-}
QSERVE_LIBS=${QSERVE_LIBS:-}
QS=("$QSERVE")
if [[ -n $QSERVE_LIBS ]]; then
  QS=(env "LD_LIBRARY_PATH=$QSERVE_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$QSERVE")
fi

JSONL=$OUT/throughput.jsonl
HEADL=$OUT/headline.jsonl
PEERL=$OUT/peer.jsonl
LOG=$OUT/log.txt
if [[ $DRY -eq 1 ]]; then
  LOG=/dev/null
else
  mkdir -p "$OUT"
  : >"$JSONL"; : >"$HEADL"; : >"$PEERL"; : >"$LOG"
fi
START=$(date +%s)

# run TAG OUTFILE CMD...: JSON lines of CMD's stdout to OUTFILE; a run that
# prints none gets an error line with its last stderr line.
run() {
  local tag=$1 out=$2
  shift 2
  echo "+ $*" | tee -a "$LOG" >&2
  [[ $DRY -eq 1 ]] && return 0
  local t0=$SECONDS tmp
  tmp=$(mktemp)
  timeout "$CELL_TIMEOUT" "$@" >"$tmp" 2>>"$LOG"
  local rc=$?
  grep '^{' "$tmp" >>"$out"
  if ! grep -q '^{' "$tmp"; then
    local msg
    msg=$(grep -v '^\s*$' "$LOG" | tail -1 | sed 's/\\/\\\\/g; s/"/\\"/g')
    echo "{\"bench\":\"error\",\"tag\":\"$tag\",\"rc\":$rc,\"error\":\"$msg\"}" >>"$out"
  fi
  rm -f "$tmp"
  echo "  ($tag: rc $rc, $((SECONDS - t0)) s)" | tee -a "$LOG" >&2
}

common=(--device "$DEVICE" --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN"
        --max-num-batched-tokens "$MAX_BATCHED_TOKENS" --gpu-memory-utilization "$UTIL" --json)
# The headline pair: the target arch at the device's own memory and a larger batch.
if [[ $HEADLINE_SEQS -gt 0 ]]; then
  for p in $HEADLINE_PRECISIONS; do
    # shellcheck disable=SC2086
    run "headline $HEADLINE_ARCH $p" "$HEADL" "${QS[@]}" bench throughput --load-format dummy --arch "$HEADLINE_ARCH" \
      --precision "$p" "${common[@]}" --num-prompts 0 --max-num-seqs "$HEADLINE_SEQS" $EXTRA_ARGS
  done
fi

# The peer: transformers FP16 generate, same shapes and lengths, largest batch that fits.
if [[ $PEER -eq 1 ]]; then
  for arch in $PEER_ARCHS; do
    # shellcheck disable=SC2086
    run "peer $arch" "$PEERL" "$PYTHON" "$HERE/peer_hf_generate.py" --arch "$arch" --device "$DEVICE" \
      --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --json $PEER_ARGS
  done
fi

# The table (last: if the run is cut short, the headline and the peer are in already).
for arch in $ARCHS; do
  cap=$MAX_SEQS
  [[ $arch == *70b* ]] && cap=$MAX_SEQS_70B
  for p in $PRECISIONS; do
    if [[ " $SKIP " == *" $arch:$p "* ]]; then
      echo "  (skipped: $arch $p, SKIP)" | tee -a "$LOG" >&2
      [[ $DRY -eq 0 ]] && echo "{\"bench\":\"error\",\"tag\":\"$arch $p\",\"rc\":0,\"error\":\"skipped (SKIP)\"}" >>"$JSONL"
      continue
    fi
    # shellcheck disable=SC2086
    run "$arch $p" "$JSONL" "${QS[@]}" bench throughput --load-format dummy --arch "$arch" --precision "$p" \
      "${common[@]}" --num-prompts 0 --max-num-seqs "$cap" --memory-budgets "$BUDGETS" $EXTRA_ARGS
  done
done

[[ $DRY -eq 1 ]] && exit 0
echo "total $(( $(date +%s) - START )) s" | tee -a "$LOG" >&2
"$PYTHON" "$HERE/throughput_table_md.py" "$JSONL" "$HEADL" "$PEERL" >"$OUT/table.md" && cat "$OUT/table.md"
