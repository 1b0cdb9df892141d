#!/bin/sh
# Installs ONNX Runtime 1.30 (npm onnxruntime-node) for the peer tests with ../shared/bench/setup.sh, into PEER_DIR
# (or uses $EPSTACK_PEER_DIR when it already holds it). Exits 77 (ctest: skipped) without ../shared, node or npm.
# Usage: setup_peer.sh SHARED_DIR PEER_DIR
set -eu
SHARED=$1
PEER=${EPSTACK_PEER_DIR:-$2}
if [ ! -x "$SHARED/bench/setup.sh" ] && [ ! -f "$SHARED/bench/setup.sh" ]; then
  echo "SKIP: $SHARED/bench/setup.sh not found: the peer harness is not available (users have only the repository)"
  exit 77
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "SKIP: node and npm are needed to install ONNX Runtime (onnxruntime-node) for the peer tests"
  exit 77
fi
sh "$SHARED/bench/setup.sh" "$PEER"
