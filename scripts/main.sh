#!/bin/sh
# The main job: build the epstack tool, write a MobileNetV2 with epstack's own model-building API (epstack::zoo;
# weights in an external data file), show its partition plan, compile it to an EPContext model with the default
# provider stack (every provider of the build: oneDNN, then the CPU), inspect that model and its context binary, and
# run it from the EPContext model on the default stack, printing a summary of its outputs and the timing.
# Placement is ONNX Runtime's (`epstack.placement=priority`: each provider takes what it claims, in the stack's order),
# so that oneDNN compiles what it claims on every machine: by estimate (the default), oneDNN keeps a group only where
# it is clearly cheaper than the CPU provider, and on Intel's Xeons MobileNetV2 is not (level within the margin), so
# the CPU provider would take it all and there would be no EPContext node to show.
# Usage: scripts/main.sh [BUILD_DIR]   (default: build)
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
rm -f "$OUT"/convnet* "$OUT"/mobilenetv2*
"$BUILD/tools/epstack" generate mobilenetv2 "$OUT/mobilenetv2.onnx" --size 128 --external
"$BUILD/tools/epstack" inspect "$OUT/mobilenetv2.onnx"
"$BUILD/tools/epstack" partition "$OUT/mobilenetv2.onnx" --providers default --config epstack.placement=priority | head -n 12
# Compile once (the batch fixed at 4, so weights are laid out now), then load the compiled model: nothing is compiled.
"$BUILD/tools/epstack" compile "$OUT/mobilenetv2.onnx" --dims N=4 --config epstack.placement=priority \
  -o "$OUT/mobilenetv2_ctx.onnx"
"$BUILD/tools/epstack" inspect "$OUT/mobilenetv2_ctx.onnx" | sed -n '/^EPContext nodes/,$p'
"$BUILD/tools/epstack" run "$OUT/mobilenetv2_ctx.onnx" --providers default --config session.disable_model_compile=1
