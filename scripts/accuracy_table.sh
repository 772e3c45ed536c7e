#!/usr/bin/env bash
# The accuracy table of docs/accuracy.md: quantizes the default model in every
# precision and ablation step, then evaluates WikiText-2 perplexity
# (calibration on PTB, never on the evaluated text). One JSON line per row
# goes to $OUT/results.jsonl (quantize summaries to $OUT/<row>.quantize.txt).
#   scripts/accuracy_table.sh [OUT]   env: QSERVE, MODEL, SEQLEN, WINDOWS, CALIB_SAMPLES, CALIB_SEQLEN, ROWS
# ROWS: a space-separated subset of the row names below (two subsets may run at once
# into the same OUT: each row appends one line to results.jsonl).
# A row's optional third field is its own number of calibration sequences.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/accuracy}
QSERVE=${QSERVE:-build/qserve}
DATA=${QSERVE_SHARED_DATA:-../shared/data}
MODEL=${MODEL:-${QSERVE_HOME:-$HOME/.cache/qserve}/models/SmolLM2-135M-Instruct}
SEQLEN=${SEQLEN:-2048}
WINDOWS=${WINDOWS:-0}
CALIB_TEXT=(--calib-text "$DATA/text/ptb.test.txt" --calib-seqlen "${CALIB_SEQLEN:-512}")
TEXT=$DATA/text/wikitext2_test_joined_LF.txt
mkdir -p "$OUT"
# row name | quantize arguments ("-" = evaluate the original model)
rows=(
  "fp16|-"
  "w8a8kv8_smoothquant|--precision w8a8kv8 --rtn --smoothquant"
  "w4a16_g128_rtn|--precision w4a16 --rtn"
  "w4a8kv4_g128_rtn|--precision w4a8kv4 --rtn"
  "w4a8kv4_g128_rot|--precision w4a8kv4 --no-smooth-attn --no-smooth --no-reorder --no-clip"
  "w4a8kv4_g128_rot_sattn|--precision w4a8kv4 --no-smooth --no-reorder --no-clip"
  "w4a8kv4_g128_rot_sattn_smooth|--precision w4a8kv4 --no-reorder --no-clip"
  "w4a8kv4_g128_rot_sattn_smooth_reorder|--precision w4a8kv4 --no-clip"
  "w4a8kv4_g128_qoq|--precision w4a8kv4"
  "w4a8kv4_g128_qoq_gptq_l2r|--precision w4a8kv4 --gptq --gptq-no-act-order"
  "w4a8kv4_g128_qoq_gptq|--precision w4a8kv4 --gptq"
  "w4a8kv4_pc_qoq|--precision w4a8kv4 --group-size -1"
  "w4a8kv4_pc_qoq_gptq_l2r|--precision w4a8kv4 --group-size -1 --gptq --gptq-no-act-order"
  "w4a8kv4_pc_qoq_gptq|--precision w4a8kv4 --group-size -1 --gptq"
  "w4a8kv4_g128_qoq_norot_gptq_l2r|--precision w4a8kv4 --no-rotate --gptq --gptq-no-act-order"
  "w4a8kv4_g128_qoq_norot_gptq|--precision w4a8kv4 --no-rotate --gptq"
  "w4a8kv4_g128_rtn_gptq_l2r|--precision w4a8kv4 --rtn --gptq --gptq-no-act-order"
  "w4a8kv4_g128_qoq_gptq_vrot|--precision w4a8kv4 --gptq --rotate-values"
  "w4a8kv4_g128_qoq_gptq_qstream|--precision w4a8kv4 --gptq --quantized-stream"
  "w4a8kv4_g128_qoq_gptq_qstream_c64|--precision w4a8kv4 --gptq --quantized-stream --gptq-rows 16384|64"
  "w4a8kv4_g128_qoq_gptq_qstream_c128|--precision w4a8kv4 --gptq --quantized-stream --gptq-rows 32768|128"
  "w4a8kv4_g128_qoq_gptq_qstream_c64_clipsearch|--precision w4a8kv4 --gptq --quantized-stream --gptq-clip-search --gptq-rows 16384|64"
  "w4a8kv4_g128_qoq_gptq_qstream_c64_seq|--precision w4a8kv4 --gptq --quantized-stream --gptq-sequential --gptq-rows 16384|64"
  "w4a8kv4_g128_qoq_gptq_qstream_c64_seq_fptarget|--precision w4a8kv4 --gptq --quantized-stream --gptq-sequential --gptq-fp-target --gptq-rows 16384|64"
)
for row in "${rows[@]}"; do
  name=${row%%|*}
  rest=${row#*|}
  args=${rest%%|*}
  samples=${CALIB_SAMPLES:-32}
  [ "$rest" != "$args" ] && samples=${rest#*|}
  if [ -n "${ROWS:-}" ] && ! grep -qw "$name" <<<"$ROWS"; then continue; fi
  model=$MODEL
  if [ "$args" != "-" ]; then
    model=$OUT/$name
    calib=("${CALIB_TEXT[@]}" --calib-samples "$samples")
    # shellcheck disable=SC2086
    $QSERVE quantize --model "$MODEL" --out "$model" $args "${calib[@]}" -q >"$OUT/$name.quantize.txt"
  fi
  $QSERVE eval ppl --model "$model" --text "$TEXT" --seqlen "$SEQLEN" --max-windows "$WINDOWS" --json |
    python3 -c "import json,sys; j=json.loads(sys.stdin.read()); j['row']='$name'; print(json.dumps(j))" >>"$OUT/results.jsonl"
  tail -n1 "$OUT/results.jsonl"
done
