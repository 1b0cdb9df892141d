#!/bin/sh
# The main job: build the epstack tool, generate a model with epstack's own IR (weights in external data), and
# inspect it. Usage: scripts/main.sh [BUILD_DIR]   (default: build)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="${CXX:-g++-12}" \
  -DEPSTACK_BUILD_TESTS=OFF -DEPSTACK_BUILD_BENCHMARKS=OFF
cmake --build "$BUILD" --target epstack_cli -j "$(nproc)"
OUT="$BUILD/main-job"
mkdir -p "$OUT"
rm -f "$OUT/mlp.onnx" "$OUT/mlp.onnx.data"
"$BUILD/tools/epstack" generate mlp "$OUT/mlp.onnx" --widths 1024,4096,4096,1024,10 --external
"$BUILD/tools/epstack" inspect "$OUT/mlp.onnx"
