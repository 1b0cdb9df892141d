#!/bin/sh
# The default stack against its members, interleaved (issue 18: "never more than 3% slower than the better of cpu and
# dnnl,cpu"): per model and round, `epstack perf` on the default stack (placement by estimate), on dnnl,cpu with
# ONNX Runtime's greedy priority placement, and on cpu, one after the other, so that the machine's phases fall on all
# three alike. Prints each run, then per model the ratio default / the faster member in each round and their median.
# Usage: scripts/bench_members.sh [BUILD_DIR] [MODEL ...]
#   env: MODELS_DIR (default BUILD_DIR/shared-models), ROUNDS (3), ITERS (40), THREADS (2)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift 1 2>/dev/null || shift $#
MODELS=${MODELS_DIR:-$BUILD/shared-models}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-40}
THREADS=${THREADS:-2}
LIST=${*:-"mlp_b1 mlp_b64 resnet50 mobilenetv2 bert_base_seq128 bert_layernorm17 llm_prefill llm_decode mixed_ops"}
[ -x "$BUILD/tools/epstack" ] || { echo "bench_members: $BUILD/tools/epstack is missing" >&2; exit 1; }
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for m in $LIST; do
    [ -f "$MODELS/$m.onnx" ] || { echo "bench_members: no $MODELS/$m.onnx (ctest -L shared generates them)" >&2; exit 1; }
    for cfg in default dnnl,cpu cpu; do
      extra=""
      [ "$cfg" = dnnl,cpu ] && extra="--config epstack.placement=priority"
      # The run_ms median from the JSON line (its first "median" is create_ms's).
      ms=$("$BUILD/tools/epstack" perf --model "$MODELS/$m.onnx" --providers "$cfg" --threads "$THREADS" --warmup 5 \
        --iters "$ITERS" --creates 1 $extra 2>/dev/null | sed -n 's/.*"run_ms":{"median":\([0-9.]*\).*/\1/p')
      [ -n "$ms" ] || { echo "bench_members: epstack perf failed on $m ($cfg)" >&2; exit 1; }
      echo "$r $m $cfg $ms" | tee -a "$OUT"
    done
  done
  r=$((r + 1))
done
awk '
  { t[$2, $1, $3] = $4; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } if ($1 > rounds) rounds = $1 }
  END {
    print "model: default / the faster of dnnl,cpu (priority) and cpu, per round; median"
    for (i = 1; i <= n; ++i) {
      m = order[i]; line = ""; k = 0
      for (r = 1; r <= rounds; ++r) {
        best = t[m, r, "dnnl,cpu"]; if (t[m, r, "cpu"] < best) best = t[m, r, "cpu"]
        v[++k] = t[m, r, "default"] / best; line = line sprintf(" %.3f", v[k])
      }
      for (a = 1; a <= k; ++a) for (b = a + 1; b <= k; ++b) if (v[b] < v[a]) { x = v[a]; v[a] = v[b]; v[b] = x }
      med = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
      printf "  %-18s%s  median %.3f\n", m, line, med
    }
  }' "$OUT"
