#!/bin/sh
# Installs the Debian 12 packages epstack needs to build, test and benchmark. Idempotent: installs only what is missing.
# Uses sudo when not run as root. Installs nothing from anywhere but Debian's package archive.
set -eu

PACKAGES="g++-12 cmake ninja-build ccache pkg-config
clang-19 libclang-rt-19-dev
libonnx-dev libprotobuf-dev protobuf-compiler
libflatbuffers-dev flatbuffers-compiler
libboost-graph-dev libboost-container-dev libxxhash-dev libeigen3-dev libdnnl-dev ocl-icd-opencl-dev
doctest-dev libbenchmark-dev
libonnx-testdata python3-onnx python3-numpy
libre2-dev libjpeg-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev"
# libre2-dev ... libopenjp2-7-dev: RE2 (RegexFullMatch) and the image codecs of ImageDecoder, for the CPU provider.
# ocl-icd-opencl-dev: Debian's oneDNN is built with its OpenCL GPU runtime, so its CMake package config requires the
# OpenCL headers and library (libdnnl-dev only recommends them, and recommends are not installed here).
# The peer tests install ONNX Runtime (onnxruntime-node) with npm: Debian's node and npm when the machine has none
# (a node installed otherwise, which brings its own npm, is left alone).
command -v node >/dev/null 2>&1 || PACKAGES="$PACKAGES nodejs"
command -v npm >/dev/null 2>&1 || PACKAGES="$PACKAGES npm"

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "setup: all packages are installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup: not root and no sudo; install:$missing" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing:$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
