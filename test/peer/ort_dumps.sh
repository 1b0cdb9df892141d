#!/bin/sh
# Runs ONNX Runtime 1.30 once on every shared model (ort_bench.mjs --out-dir) so the peer tests can compare outputs
# on bit-identical inputs. Dumps already present are reused. Exits 77 (skipped) when a prerequisite is missing.
# Usage: ort_dumps.sh SHARED_DIR PEER_DIR MODELS_DIR OUT_DIR
set -eu
SHARED=$1
PEER=${EPSTACK_PEER_DIR:-$2}
MODELS=$3
OUT=$4
if [ ! -f "$SHARED/bench/ort_bench.mjs" ] || [ ! -f "$MODELS/models.json" ]; then
  echo "SKIP: the shared models or the peer harness are missing"
  exit 77
fi
if ! (cd "$PEER" 2>/dev/null && node -e 'require("onnxruntime-node")' >/dev/null 2>&1); then
  echo "SKIP: onnxruntime-node is not installed in $PEER"
  exit 77
fi
mkdir -p "$OUT"
for m in "$MODELS"/*.onnx; do
  name=$(basename "$m" .onnx)
  if [ -f "$OUT/$name/manifest.json" ]; then continue; fi
  node "$SHARED/bench/ort_bench.mjs" --peer-dir "$PEER" --model "$m" --threads 2 --warmup 0 --iters 1 --creates 0 \
    --out-dir "$OUT/$name" > "$OUT/$name.json"
done
echo "ONNX Runtime dumps in $OUT"
