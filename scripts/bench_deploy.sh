#!/bin/sh
# The deployables against the full library on the same models (issue 20: a deployable runs within 5% of the full
# library): the shared benchmark's mobilenetv2 (N=1) and mlp_b1, each compiled to a deployment model for the CPU
# provider, run ITERS times by the deployable (examples/deploy_*) and by `epstack perf` on the same deployment model and
# on the ONNX model, alternated, ROUNDS rounds in one window, THREADS intra-op threads. Prints the median and p90 of each,
# and the deployable's ratios to the full library.
# Usage: scripts/bench_deploy.sh [BUILD_DIR] [MODELS_DIR]   (MODELS_DIR: the shared models, default BUILD_DIR/shared-models,
# which the `shared` tests generate)
set -eu
BUILD=${1:-build}
MODELS=${2:-$BUILD/shared-models}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-200}
THREADS=${THREADS:-2}
E="$BUILD/tools/epstack"
OUT="$BUILD/bench-deploy"
mkdir -p "$OUT"
for f in mobilenetv2 mlp_b1; do
  [ -f "$MODELS/$f.onnx" ] || { echo "bench_deploy: $MODELS/$f.onnx not found (run the shared tests first)" >&2; exit 1; }
done
field() { sed -n "s/.*\"$1\":{[^}]*\"$2\":\([0-9.]*\).*/\1/p"; }
printf "%-12s %-5s %12s %12s %12s %12s %12s %12s %8s %8s\n" model round deploy_med deploy_p90 full_d_med full_d_p90 \
  full_onnx_med full_onnx_p90 ratio_med ratio_p90
for spec in mobilenetv2:deploy_mobilenetv2:--dims=N=1 mlp_b1:deploy_mlp:; do
  model=${spec%%:*}
  rest=${spec#*:}
  prog=${rest%%:*}
  dims=${rest#*:}
  "$E" compile "$MODELS/$model.onnx" --format deploy --providers cpu $dims --overwrite -o "$OUT/$model.deploy" >/dev/null
  r=1
  while [ "$r" -le "$ROUNDS" ]; do
    d=$("$BUILD/examples/$prog" "$OUT/$model.deploy" --runs $((ITERS + 1)) --threads "$THREADS" | tail -n 1)
    d_med=$(echo "$d" | sed -n 's/.*run median \([0-9.]*\) ms.*/\1/p')
    d_p90=$(echo "$d" | sed -n 's/.*p90 \([0-9.]*\) ms.*/\1/p')
    f=$("$E" perf --model "$OUT/$model.deploy" --providers cpu --threads "$THREADS" --warmup 1 --iters "$ITERS" --creates 1 2>/dev/null)
    f_med=$(echo "$f" | field run_ms median)
    f_p90=$(echo "$f" | field run_ms p90)
    o=$("$E" perf --model "$MODELS/$model.onnx" --providers cpu --threads "$THREADS" --warmup 1 --iters "$ITERS" --creates 1 \
        $(echo "$dims" | sed 's/--dims=/--free-dims /') 2>/dev/null)
    o_med=$(echo "$o" | field run_ms median)
    o_p90=$(echo "$o" | field run_ms p90)
    printf "%-12s %-5s %12s %12s %12s %12s %12s %12s %8s %8s\n" "$model" "$r" "$d_med" "$d_p90" "$f_med" "$f_p90" \
      "$o_med" "$o_p90" "$(awk "BEGIN { printf \"%.3f\", $d_med / $f_med }")" "$(awk "BEGIN { printf \"%.3f\", $d_p90 / $f_p90 }")"
    r=$((r + 1))
  done
done
