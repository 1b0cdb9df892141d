#!/bin/sh
# EPContext create time, side by side: ONNX Runtime 1.30 creating a session from the source model
# (../shared/bench/ort_bench.mjs), epstack from the source model and from its `_ctx.onnx`, back to back in each round,
# on the same provider stack and threads. Each model is compiled once first (`epstack compile --dims`, so weights are
# laid out at compile time); the source sessions get the same dims as free dimension overrides.
# Prints, per round and model: the create medians (ms), the ratios source/ctx and ORT/ctx, ctx/read (read: the time
# to read() the context model and its binaries, `perf`'s read_ms), the first run and the median run from the source and
# from the context (a context's weights are verified before their first use: that is in its first run), the binary's
# size and peak RSS; then the weightless context (ep.enable_weightless_mode 2: the binary without weights, which come
# from the source model at load) and the compile cache (epstack.cache_dir: the second create of the source model, a
# hit) beside the full context: their create medians, cached / ctx, the weightless binary's size and its peak RSS.
# Then, once, the memory target: peak RSS after loading and running from the context, less the peak RSS of the same
# process doing the same with a tiny context model on the same stack (the fixed cost of the program: its libraries'
# pages, onnx's schema registry, the provider's start-up), against 1.1x the weights plus the activation plan
# (`perf`'s arena_mb). All in MiB (2^20 bytes), as the kernel counts RSS.
# Usage: scripts/bench_context.sh [BUILD_DIR] [PROVIDERS] [MODEL ...]
#   env: EPSTACK_SHARED_DIR (default ../shared), EPSTACK_PEER_DIR (default BUILD_DIR/peer),
#        MODELS_DIR (default BUILD_DIR/shared-models), THREADS (2), ROUNDS (3), CREATES (5)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PROVIDERS=${2:-dnnl,cpu}
shift 2 2>/dev/null || shift $#
SHARED=${EPSTACK_SHARED_DIR:-../shared}
PEER=${EPSTACK_PEER_DIR:-$BUILD/peer}
MODELS=${MODELS_DIR:-$BUILD/shared-models}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
CREATES=${CREATES:-5}
OUT="$BUILD/bench-context/$(echo "$PROVIDERS" | tr ',' '_')"
EPSTACK="$BUILD/tools/epstack"
[ -f "$SHARED/bench/ort_bench.mjs" ] || { echo "bench_context: $SHARED/bench is missing" >&2; exit 1; }
[ -f "$MODELS/models.json" ] || { echo "bench_context: no models in $MODELS (ctest -L shared generates them)" >&2; exit 1; }
sh "$SHARED/bench/setup.sh" "$PEER" >/dev/null
mkdir -p "$OUT"
LIST=${*:-"resnet50 llm_prefill bert_base_seq128"}
dims_of() {  # the model's benchmark dims from models.json ("" when it has none)
  /usr/bin/python3 -c 'import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    if m["name"] == sys.argv[2]: print(m.get("bench_dims", ""))' "$MODELS/models.json" "$1"
}
field() {  # field FILE EXPR: a value of the JSON line in FILE
  /usr/bin/python3 -c 'import json, sys; d = json.loads(open(sys.argv[1]).read()); print(eval(sys.argv[2]))' "$1" "$2"
}
rm -rf "$OUT/cache"
for m in $LIST; do
  d=$(dims_of "$m")
  cp "$MODELS/$m.onnx" "$OUT/$m.onnx"
  [ -e "$MODELS/$m.onnx.data" ] && cp "$MODELS/$m.onnx.data" "$OUT/"
  rm -f "$OUT/${m}_ctx.onnx" "$OUT/${m}_"*.bin
  "$EPSTACK" compile "$OUT/$m.onnx" --providers "$PROVIDERS" --threads "$THREADS" ${d:+--dims "$d"} >/dev/null
  # The weightless context, beside its own copy of the source model (found by onnx_model_filename at load).
  mkdir -p "$OUT/weightless"
  cp "$MODELS/$m.onnx" "$OUT/weightless/$m.onnx"
  [ -e "$MODELS/$m.onnx.data" ] && cp "$MODELS/$m.onnx.data" "$OUT/weightless/"
  rm -f "$OUT/weightless/${m}_ctx.onnx" "$OUT/weightless/${m}_"*.bin
  "$EPSTACK" compile "$OUT/weightless/$m.onnx" --providers "$PROVIDERS" --threads "$THREADS" ${d:+--dims "$d"} \
    --config ep.enable_weightless_mode=2 >/dev/null
  # The compile cache, filled by one create of the source model (a miss): the creates measured below are hits.
  "$EPSTACK" perf --model "$OUT/$m.onnx" --providers "$PROVIDERS" --threads "$THREADS" --warmup 0 --iters 1 --creates 1 \
    ${d:+--free-dims "$d"} --config "epstack.cache_dir=$OUT/cache" >/dev/null 2>&1
done
r=0
while [ "$r" -lt "$ROUNDS" ]; do
  echo "round $((r + 1)) of $ROUNDS:"
  echo "| model | ORT (ms) | source (ms) | ctx (ms) | read (ms) | source / ctx | ORT / ctx | ctx / read | first run source / ctx (ms) | run source / ctx (ms) | binary (MB) | peak RSS source / ctx / ORT (MB) | weightless (ms) | cached (ms) | cached / ctx | weightless binary (MB) | weightless peak RSS (MB) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for m in $LIST; do
    d=$(dims_of "$m")
    node "$SHARED/bench/ort_bench.mjs" --peer-dir "$PEER" --model "$OUT/$m.onnx" --threads "$THREADS" \
      --warmup 1 --iters 5 --creates "$CREATES" ${d:+--dims "$d"} > "$OUT/$m.ort.json" 2>/dev/null
    "$EPSTACK" perf --model "$OUT/$m.onnx" --providers "$PROVIDERS" --threads "$THREADS" --warmup 1 --iters 5 \
      --creates "$CREATES" ${d:+--free-dims "$d"} > "$OUT/$m.src.json" 2>/dev/null
    "$EPSTACK" perf --model "$OUT/${m}_ctx.onnx" --providers "$PROVIDERS" --threads "$THREADS" --warmup 1 --iters 5 \
      --creates "$CREATES" > "$OUT/$m.ctx.json" 2>/dev/null
    "$EPSTACK" perf --model "$OUT/weightless/${m}_ctx.onnx" --providers "$PROVIDERS" --threads "$THREADS" --warmup 1 \
      --iters 5 --creates "$CREATES" > "$OUT/$m.wl.json" 2>/dev/null
    "$EPSTACK" perf --model "$OUT/$m.onnx" --providers "$PROVIDERS" --threads "$THREADS" --warmup 1 --iters 5 \
      --creates "$CREATES" ${d:+--free-dims "$d"} --config "epstack.cache_dir=$OUT/cache" > "$OUT/$m.cached.json" 2>/dev/null
    wl=$(field "$OUT/$m.wl.json" 'd["create_ms"]["median"]')
    cached=$(field "$OUT/$m.cached.json" 'd["create_ms"]["median"]')
    wlbin=$(ls -l "$OUT/weightless/${m}_"*.bin | awk '{s += $5} END {printf "%.3f", s / 1e6}')
    wlrss=$(field "$OUT/$m.wl.json" 'round(d["peak_rss_mb"])')
    ort=$(field "$OUT/$m.ort.json" 'd["create_ms"]["median"]')
    src=$(field "$OUT/$m.src.json" 'd["create_ms"]["median"]')
    ctx=$(field "$OUT/$m.ctx.json" 'd["create_ms"]["median"]')
    rd=$(field "$OUT/$m.ctx.json" 'd["read_ms"]["median"]')
    bin=$(ls -l "$OUT/${m}_"*.bin | awk '{s += $5} END {printf "%.0f", s / 1e6}')
    first="$(field "$OUT/$m.src.json" 'round(d["first_run_ms"], 1)') / $(field "$OUT/$m.ctx.json" 'round(d["first_run_ms"], 1)')"
    run="$(field "$OUT/$m.src.json" 'round(d["run_ms"]["median"], 1)') / $(field "$OUT/$m.ctx.json" 'round(d["run_ms"]["median"], 1)')"
    rss="$(field "$OUT/$m.src.json" 'round(d["peak_rss_mb"])') / $(field "$OUT/$m.ctx.json" 'round(d["peak_rss_mb"])') / $(field "$OUT/$m.ort.json" 'round(d["peak_rss_mb"])')"
    /usr/bin/python3 -c 'import sys
m, o, s, c, r, first, run, b, rss, wl, ca, wb, wr = sys.argv[1:]; o, s, c, r, wl, ca = map(float, (o, s, c, r, wl, ca))
print(f"| {m} | {o:.1f} | {s:.1f} | {c:.1f} | {r:.1f} | {s / c:.1f}x | {o / c:.1f}x | {c / r:.2f} | {first} | {run} | {b} | {rss} | {wl:.1f} | {ca:.2f} | {ca / c:.2f} | {wb} | {wr} |")' \
      "$m" "$ort" "$src" "$ctx" "$rd" "$first" "$run" "$bin" "$rss" "$wl" "$cached" "$wlbin" "$wlrss"
  done
  r=$((r + 1))
done

# The memory target, from the last round's ctx runs.
tiny="$OUT/tiny_convnet"
rm -f "$tiny"*
"$EPSTACK" generate convnet "$tiny.onnx" --channels 4,8 --size 16 >/dev/null
"$EPSTACK" compile "$tiny.onnx" --providers "$PROVIDERS" --threads "$THREADS" --dims N=1 >/dev/null
"$EPSTACK" perf --model "${tiny}_ctx.onnx" --providers "$PROVIDERS" --threads "$THREADS" --warmup 1 --iters 5 \
  --creates "$CREATES" > "$tiny.ctx.json" 2>/dev/null
fixed=$(field "$tiny.ctx.json" 'd["peak_rss_mb"]')
echo "memory (MiB): the program's fixed cost (a tiny context model on this stack) $fixed"
echo "| model | weights | activation plan | limit 1.1 x weights + plan | ctx peak RSS | above the fixed cost | within |"
echo "|---|---:|---:|---:|---:|---:|---|"
for m in $LIST; do
  w=$(/usr/bin/python3 -c 'import onnx, sys
from onnx import mapping
m = onnx.load(sys.argv[1], load_external_data=False)
n = 0
for t in m.graph.initializer:
    k = 1
    for x in t.dims: k *= x
    n += k * mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type].itemsize
print(n / 2**20)' "$OUT/$m.onnx")
  /usr/bin/python3 -c 'import sys
m, w, a, p, f = sys.argv[1], *map(float, sys.argv[2:])
lim = 1.1 * w + a
ok = "yes" if p - f <= lim else "no"
print(f"| {m} | {w:.1f} | {a:.1f} | {lim:.1f} | {p:.1f} | {p - f:.1f} | {ok} |")' \
    "$m" "$w" "$(field "$OUT/$m.ctx.json" 'd["arena_mb"]')" "$(field "$OUT/$m.ctx.json" 'd["peak_rss_mb"]')" "$fixed"
done
