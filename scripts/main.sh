#!/bin/sh
# The main job: build the epstack tool, write a residual convolutional network with epstack's own model-building API
# (epstack::zoo; weights in an external data file), show its partition plan, and run it on the default provider stack,
# printing a summary of its outputs and the timing. Usage: scripts/main.sh [BUILD_DIR]   (default: build)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
# A new build folder is configured for the tool alone; an existing one (the test command's) keeps its settings.
if [ -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD"
else
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="${CXX:-g++-12}" \
    -DEPSTACK_BUILD_TESTS=OFF -DEPSTACK_BUILD_BENCHMARKS=OFF
fi
cmake --build "$BUILD" --target epstack_cli -j "$(nproc)"
OUT="$BUILD/main-job"
mkdir -p "$OUT"
rm -f "$OUT/convnet.onnx" "$OUT/convnet.onnx.data"
"$BUILD/tools/epstack" generate convnet "$OUT/convnet.onnx" --channels 32,64,128 --size 128 --external
"$BUILD/tools/epstack" inspect "$OUT/convnet.onnx"
"$BUILD/tools/epstack" partition "$OUT/convnet.onnx" | head -n 12
"$BUILD/tools/epstack" run "$OUT/convnet.onnx" --dims N=4
