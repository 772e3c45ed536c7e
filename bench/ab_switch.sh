#!/usr/bin/env bash
# A against B of a run-time switch in one binary: runs a command in the order
# A B B A (or --order), with the environment variable VAR set to A's value or
# B's, so that both sides run the same code layout and the passes interleave.
# bench/ab_compare.py reads what it writes.
#
#   bench/ab_switch.sh [--order ABBA] VAR A_VALUE B_VALUE OUTDIR gemm   -- bench_gemm ARGS...
#   bench/ab_switch.sh [--order ABBA] VAR A_VALUE B_VALUE OUTDIR engine -- qserve bench throughput ARGS... --json
#
# gemm: pass k of side S writes OUTDIR/S<k>.json (the command gets --json FILE)
# and OUTDIR/S<k>.log; then
#   bench/ab_compare.py gemm --a OUTDIR/A1.json,OUTDIR/A2.json --b OUTDIR/B1.json,OUTDIR/B2.json
# engine: the command's JSON lines (stdout lines starting with "{") are appended
# to OUTDIR/engine.jsonl with "v": "A" or "B" first; stderr goes to
# OUTDIR/engine.log; then
#   bench/ab_compare.py engine OUTDIR/engine.jsonl --a A --b B
# A value "-" leaves VAR unset for that side. Each pass's wall time is printed.
set -euo pipefail

order=ABBA
if [ "${1:-}" = "--order" ]; then
  order=$2
  shift 2
fi
if [ $# -lt 7 ] || [ "$6" != "--" ]; then
  sed -n '2,20p' "$0" >&2
  exit 2
fi
var=$1 a_value=$2 b_value=$3 outdir=$4 kind=$5
shift 6
case "$kind" in gemm | engine) ;; *) echo "ab_switch.sh: kind is gemm or engine, not $kind" >&2; exit 2 ;; esac
case "$order" in *[!AB]* | "") echo "ab_switch.sh: --order takes A and B only" >&2; exit 2 ;; esac
mkdir -p "$outdir"

run_side() {  # side pass command...
  local side=$1 pass=$2 value
  shift 2
  if [ "$side" = A ]; then value=$a_value; else value=$b_value; fi
  local -a env_args=()
  if [ "$value" = "-" ]; then env_args=(-u "$var"); else env_args=("$var=$value"); fi
  local start=$SECONDS
  if [ "$kind" = gemm ]; then
    env "${env_args[@]}" "$@" --json "$outdir/$side$pass.json" >"$outdir/$side$pass.log" 2>&1
  else
    env "${env_args[@]}" "$@" 2>>"$outdir/engine.log" |
      { grep '^{' || true; } | sed "s/^{/{\"v\": \"$side\", /" >>"$outdir/engine.jsonl"
  fi
  echo "ab_switch: $side pass $pass ($var=$value): $((SECONDS - start)) s"
}

declare -A passes=([A]=0 [B]=0)
for ((i = 0; i < ${#order}; ++i)); do
  side=${order:i:1}
  passes[$side]=$((passes[$side] + 1))
  run_side "$side" "${passes[$side]}" "$@"
done
