#!/bin/sh
# Two builds (or two settings of one build) of `epstack perf` on one model, alternated process by process: A, B, A,
# B... so that this VM's phases (up to 10-25% between windows) fall on both alike. What a change is worth is read from
# the pairs, not from two windows taken apart: the README's "0.981 of its time" figures come from here.
#   scripts/perf_ab.sh MODEL [PAIRS]
#   env: BIN_A, BIN_B (default build/tools/epstack both), ENV_A, ENV_B (environment assignments for each side, e.g.
#        ENV_B="EPSTACK_PROFILE_ALL=1"), PROVIDERS (default), THREADS (2), ITERS (60), MODELS_DIR (build/shared-models)
#        PROFILE=1: per-node times instead (`epstack perf --profile` with EPSTACK_PROFILE_ALL=1, 40 runs a process),
#        the nodes whose mean time differs most listed first (TOP of them, default 20).
# Prints each pair (A ms, B ms, B / A), then the geometric mean of B / A over the pairs (below 1: B is faster).
# MODEL is a name in MODELS_DIR or a path to an .onnx file.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/perf_ab.sh MODEL [PAIRS]" >&2; exit 2; }
MODEL=$1
PAIRS=${2:-8}
MODELS=${MODELS_DIR:-build/shared-models}
case $MODEL in
  *.onnx) ;;
  *) MODEL=$MODELS/$MODEL.onnx ;;
esac
[ -f "$MODEL" ] || { echo "perf_ab: no model at $MODEL" >&2; exit 1; }
BIN_A=${BIN_A:-build/tools/epstack}
BIN_B=${BIN_B:-build/tools/epstack}
for b in "$BIN_A" "$BIN_B"; do [ -x "$b" ] || { echo "perf_ab: $b is not an executable" >&2; exit 1; }; done
PROVIDERS=${PROVIDERS:-default}
THREADS=${THREADS:-2}
ITERS=${ITERS:-60}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

run() {  # run SIDE BIN ENV: one process, its run median (ms) on stdout, or its profile appended to OUT/SIDE.prof
  if [ "${PROFILE:-0}" = 1 ]; then
    env $3 EPSTACK_PROFILE_ALL=1 "$2" perf --model "$MODEL" --providers "$PROVIDERS" --threads "$THREADS" --profile \
      --iters 40 2>&1 | grep -E "ms/run  node|profile:" >> "$OUT/$1.prof"
  else
    env $3 "$2" perf --model "$MODEL" --providers "$PROVIDERS" --threads "$THREADS" --iters "$ITERS" --warmup 10 \
      --creates 1 2>/dev/null | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["run_ms"]["median"])'
  fi
}

i=0
while [ "$i" -lt "$PAIRS" ]; do
  a=$(run a "$BIN_A" "${ENV_A:-}")
  b=$(run b "$BIN_B" "${ENV_B:-}")
  [ "${PROFILE:-0}" = 1 ] || echo "$a $b" >> "$OUT/pairs"
  i=$((i + 1))
done

if [ "${PROFILE:-0}" = 1 ]; then
  /usr/bin/python3 - "$OUT/a.prof" "$OUT/b.prof" <<'PY'
import collections, os, re, sys
def read(path):
    nodes, totals = collections.defaultdict(list), []
    for line in open(path):
        m = re.match(r"\s+([\d.]+) ms/run\s+node '(\S+)'", line)
        if m:
            nodes[m.group(2)].append(float(m.group(1)))
        m = re.search(r"profile: ([\d.]+) ms", line)
        if m:
            totals.append(float(m.group(1)))
    return {k: sum(v) / len(v) for k, v in nodes.items()}, totals
a, ta = read(sys.argv[1])
b, tb = read(sys.argv[2])
rows = sorted(((b[k] - a[k], k, a[k], b[k]) for k in a if k in b), key=lambda r: -abs(r[0]))
print("%9s %9s %9s  node (mean ms per run over the processes)" % ("B - A", "A", "B"))
for d, k, x, y in rows[:int(os.environ.get("TOP", "20"))]:
    print("%+9.3f %9.3f %9.3f  %s" % (d, x, y, k))
print("profiled totals A", " ".join("%.3f" % t for t in ta), "| B", " ".join("%.3f" % t for t in tb))
PY
else
  awk '{ r = $2 / $1; s += log(r); n++; printf "A %s ms  B %s ms  B/A %.4f\n", $1, $2, r }
       END { if (n) printf "geometric mean of B/A over %d pairs: %.4f\n", n, exp(s / n) }' "$OUT/pairs"
fi
