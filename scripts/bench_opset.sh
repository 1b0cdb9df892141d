#!/bin/sh
# The shared benchmark models at their own opsets and converted to ai.onnx opset 21 / IR 10 with epstack's own
# converter (`epstack convert`), run by `epstack perf` model by model, alternately, in one time window; then
# ../shared/bench/compare.py prints the ratios (opset 21 / original: 1.00 is "as fast").
# Usage: scripts/bench_opset.sh [BUILD_DIR] [PROVIDERS] [MODEL ...]
#   env: EPSTACK_SHARED_DIR (default ../shared), MODELS_DIR (default BUILD_DIR/shared-models), OPSET (21), IR (10),
#        ITERS (50), THREADS (2), ROUNDS (1)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PROVIDERS=${2:-default}
shift 2 2>/dev/null || shift $#
SHARED=${EPSTACK_SHARED_DIR:-../shared}
MODELS=${MODELS_DIR:-$BUILD/shared-models}
OPSET=${OPSET:-21}
IR=${IR:-10}
ITERS=${ITERS:-50}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-1}
CONVERTED="$BUILD/shared-models-opset$OPSET"
OUT="$BUILD/bench-opset$OPSET/$(echo "$PROVIDERS" | tr ',' '_')"
[ -f "$MODELS/models.json" ] || { echo "bench_opset: no models in $MODELS (ctest -L shared generates them)" >&2; exit 1; }
mkdir -p "$CONVERTED" "$OUT"
LIST=${*:-"mlp_b1 mlp_b64 resnet50 mobilenetv2 bert_base_seq128 bert_layernorm17 llm_prefill llm_decode mixed_ops"}
for m in $LIST; do
  [ "$CONVERTED/$m.onnx" -nt "$MODELS/$m.onnx" ] ||
    "$BUILD/tools/epstack" convert "$MODELS/$m.onnx" "$CONVERTED/$m.onnx" --opset "$OPSET" --ir "$IR"
done
r=0
while [ "$r" -lt "$ROUNDS" ]; do
  : > "$OUT/original.$r.jsonl"
  : > "$OUT/converted.$r.jsonl"
  for m in $LIST; do
    for which in original converted; do
      dir=$MODELS
      [ "$which" = converted ] && dir=$CONVERTED
      "$BUILD/tools/epstack" perf --model "$dir/$m.onnx" --providers "$PROVIDERS" --threads "$THREADS" \
        --warmup 10 --iters "$ITERS" --creates 5 --max-seconds 30 >> "$OUT/$which.$r.jsonl"
    done
  done
  echo "round $((r + 1)) of $ROUNDS (opset $OPSET / original):"
  /usr/bin/python3 "$SHARED/bench/compare.py" "$OUT/converted.$r.jsonl" "$OUT/original.$r.jsonl" --markdown
  r=$((r + 1))
done
