#!/bin/sh
# Side-by-side benchmark: ONNX Runtime 1.30 (../shared/bench/ort_bench.mjs) and `epstack perf`, model by model in the
# same time window, same threads and inputs; then ../shared/bench/compare.py prints the ratios (epstack / ORT) of each
# round, and scripts/peer_rounds.py the median of the rounds' ratios.
# Usage: scripts/bench_peer.sh [BUILD_DIR] [PROVIDERS] [MODEL ...]
#   env: EPSTACK_SHARED_DIR (default ../shared), EPSTACK_PEER_DIR (onnxruntime-node; default BUILD_DIR/peer),
#        MODELS_DIR (default BUILD_DIR/shared-models), ITERS (100), THREADS (2), ROUNDS (1),
#        PERF_ARGS (more arguments of `epstack perf`, e.g. "--config epstack.placement=priority"), TAG (a suffix of the
#        output folder, to keep such runs apart)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PROVIDERS=${2:-cpu}
shift 2 2>/dev/null || shift $#
SHARED=${EPSTACK_SHARED_DIR:-../shared}
PEER=${EPSTACK_PEER_DIR:-$BUILD/peer}
MODELS=${MODELS_DIR:-$BUILD/shared-models}
ITERS=${ITERS:-100}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-1}
PERF_ARGS=${PERF_ARGS:-}
OUT="$BUILD/bench-peer/$(echo "$PROVIDERS" | tr ',' '_')${TAG:+_$TAG}"
[ -f "$SHARED/bench/ort_bench.mjs" ] || { echo "bench_peer: $SHARED/bench is missing" >&2; exit 1; }
[ -f "$MODELS/models.json" ] || { echo "bench_peer: no models in $MODELS (ctest -L shared generates them)" >&2; exit 1; }
sh "$SHARED/bench/setup.sh" "$PEER" >/dev/null
mkdir -p "$OUT"
: > "$OUT/ort.jsonl"
: > "$OUT/lib.jsonl"
LIST=${*:-"mlp_b1 mlp_b64 resnet50 mobilenetv2 bert_base_seq128 bert_layernorm17 llm_prefill llm_decode mixed_ops"}
# Each round is compared on its own (compare.py pairs a model's records with the first peer record of that model,
# so rounds in one file would all be set against round 1's ONNX Runtime figures).
r=0
while [ "$r" -lt "$ROUNDS" ]; do
  : > "$OUT/ort.$r.jsonl"
  : > "$OUT/lib.$r.jsonl"
  for m in $LIST; do
    # ONNX Runtime first in even rounds, epstack first in odd ones: neither always runs right after a model change.
    for engine in $([ $((r % 2)) -eq 0 ] && echo "ort lib" || echo "lib ort"); do
      if [ "$engine" = ort ]; then
        node "$SHARED/bench/ort_bench.mjs" --peer-dir "$PEER" --model "$MODELS/$m.onnx" --threads "$THREADS" \
          --warmup 10 --iters "$ITERS" --creates 5 --max-seconds 30 >> "$OUT/ort.$r.jsonl"
      else
        "$BUILD/tools/epstack" perf --model "$MODELS/$m.onnx" --providers "$PROVIDERS" --threads "$THREADS" \
          --warmup 10 --iters "$ITERS" --creates 5 --max-seconds 30 $PERF_ARGS >> "$OUT/lib.$r.jsonl"
      fi
    done
  done
  cat "$OUT/ort.$r.jsonl" >> "$OUT/ort.jsonl"
  cat "$OUT/lib.$r.jsonl" >> "$OUT/lib.jsonl"
  echo "round $((r + 1)) of $ROUNDS:"
  /usr/bin/python3 "$SHARED/bench/compare.py" "$OUT/lib.$r.jsonl" "$OUT/ort.$r.jsonl" --markdown
  r=$((r + 1))
done
# Over the rounds: each model's median ratio (what the README's tables and issue 18's targets give).
[ "$ROUNDS" -gt 1 ] && /usr/bin/python3 scripts/peer_rounds.py "$OUT"
exit 0
