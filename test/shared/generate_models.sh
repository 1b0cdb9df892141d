#!/bin/sh
# Generates the shared benchmark models (../shared/models/make_models.py) into OUT_DIR once; later runs reuse them.
# Exits 77 (ctest: skipped) when the shared folder or Debian's python3 with onnx and numpy is missing.
# Usage: generate_models.sh SHARED_DIR OUT_DIR
set -eu
SHARED=$1
OUT=$2
GEN="$SHARED/models/make_models.py"
if [ ! -f "$GEN" ]; then
  echo "SKIP: $GEN not found: the shared models are not available (users have only the repository)"
  exit 77
fi
if ! /usr/bin/python3 -c "import onnx, numpy" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 lacks onnx or numpy (apt-get install python3-onnx python3-numpy)"
  exit 77
fi
if [ -f "$OUT/models.json" ] && [ -f "$OUT/mixed_ops.onnx" ]; then
  echo "models already generated in $OUT"
  exit 0
fi
mkdir -p "$OUT"
/usr/bin/python3 "$GEN" "$OUT"
