#!/bin/sh
# Compiles the given CPU provider or test sources for syntax and warnings only (no object, no link): a quick check
# while writing a kernel, without a full build. Usage: scripts/syntax_check.sh providers/cpu/src/attention.cpp ...
set -eu
cd "$(dirname "$0")/.."
for f in "$@"; do
  g++-12 -std=gnu++20 -fsyntax-only -Wall -Wextra -Wpedantic -Werror -Wno-maybe-uninitialized -march=native \
    -Iinclude -Iproviders/cpu/include -Iproviders/cpu/src -Itest -Itest/support -isystem /usr/include/eigen3 "$f"
  echo "ok: $f"
done
