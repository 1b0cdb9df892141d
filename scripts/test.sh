#!/bin/sh
# Builds epstack (g++-12, -Werror) and runs every test. Tests that need ../shared (the shared models) skip with a
# message when it is missing. Usage: scripts/test.sh [BUILD_DIR]   (default: build)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
JOBS=${EPSTACK_JOBS:-$(nproc)}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="${CXX:-g++-12}" \
  -DEPSTACK_WARNINGS_AS_ERRORS=ON -DEPSTACK_BUILD_TESTS=ON -DEPSTACK_BUILD_BENCHMARKS=ON ${EPSTACK_CMAKE_ARGS:-}
cmake --build "$BUILD" -j "$JOBS"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" ${EPSTACK_CTEST_ARGS:-}
