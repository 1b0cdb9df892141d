#!/bin/sh
# Determinism on the shared benchmark models: each model runs 50 times on one session and then from 8 threads at once,
# on each stack given, and every output must be bit-identical to the first run's (`epstack run --repeat 50`).
# Usage: check_determinism.sh EPSTACK MODELS_DIR STACK...
set -eu
EPSTACK=$1
MODELS=$2
shift 2
ls "$MODELS"/*.onnx >/dev/null 2>&1 || { echo "SKIP: no shared models in $MODELS"; exit 77; }
status=0
for stack in "$@"; do
  for m in "$MODELS"/*.onnx; do
    if out=$("$EPSTACK" run "$m" --providers "$stack" --threads 2 --repeat 50 2>&1); then
      echo "$stack $(basename "$m"): $(echo "$out" | grep '^deterministic')"
    else
      echo "$stack $(basename "$m"): FAILED"
      echo "$out" | tail -n 3
      status=1
    fi
  done
done
exit $status
