#!/bin/sh
# The default stack against its members, interleaved (issue 18: "never more than 3% slower than the better of cpu and
# dnnl,cpu"): per model and round, `epstack perf` on the default stack (placement by estimate), on dnnl,cpu with
# ONNX Runtime's greedy priority placement, and on cpu, one after the other, so that the machine's phases fall on all
# three alike. Prints each run, then per model the ratio default / the faster member in each round and their median.
# Separate processes still see this VM's phases differently (up to 10% between windows); `epstack compare --model M`
# (its default arms are these three) interleaves the runs in one process, which resolves 1-3%.
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
    # The order turns from round to round, so that no configuration always runs first after a model change.
    case $((r % 3)) in
      1) cfgs="default dnnl,cpu cpu" ;;
      2) cfgs="dnnl,cpu cpu default" ;;
      *) cfgs="cpu default dnnl,cpu" ;;
    esac
    for cfg in $cfgs; do
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
  function median(a, k,    i, j, x) {
    for (i = 1; i <= k; ++i) for (j = i + 1; j <= k; ++j) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  { t[$2, $1, $3] = $4; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } if ($1 > rounds) rounds = $1 }
  END {
    # Two statistics. The first divides by the faster member of each round: on a noisy machine the minimum of two
    # timings is below either one typical timing, so it leans above 1 even where default runs the plan of one member. The
    # second picks the better member by its median time over the rounds and gives the median of default / that
    # member over the same rounds (paired, unbiased): the 3% rule is read from it.
    print "model: default / the faster member per round, and median; default / the better member (by median time):"
    print "median of the paired ratios (default / cpu, default / dnnl,cpu)"
    for (i = 1; i <= n; ++i) {
      m = order[i]; line = ""; k = 0
      for (r = 1; r <= rounds; ++r) {
        best = t[m, r, "dnnl,cpu"]; if (t[m, r, "cpu"] < best) best = t[m, r, "cpu"]
        v[++k] = t[m, r, "default"] / best; line = line sprintf(" %.3f", v[k])
        c[k] = t[m, r, "cpu"]; d[k] = t[m, r, "dnnl,cpu"]
        rc[k] = t[m, r, "default"] / t[m, r, "cpu"]; rd[k] = t[m, r, "default"] / t[m, r, "dnnl,cpu"]
      }
      med = median(v, k); mc = median(c, k); md = median(d, k); qc = median(rc, k); qd = median(rd, k)
      printf "  %-18s%s  median %.3f; better member %s: %.3f (%.3f, %.3f)\n", m, line, med,
             mc <= md ? "cpu" : "dnnl,cpu", mc <= md ? qc : qd, qc, qd
    }
  }' "$OUT"
