#!/usr/bin/env bash
# Installs every Debian package Loom's build, tests and benchmarks need. Idempotent.
set -euo pipefail
packages=(
  # build, fuzzing, sanitizers
  cmake ninja-build g++ clang clang-format libclang-rt-14-dev
  # compute (oneDNN), threads, gzip data
  libdnnl-dev libomp-dev zlib1g-dev
  # TensorBoard event files are protocol buffers (tests read them back with their own decoder)
  libprotobuf-dev protobuf-compiler
  # unit tests; end-to-end tests are Python scripts; pkg-config for the install test
  libgtest-dev python3 pkgconf
  # the reference peer for bench/: PyTorch, with OpenBLAS as its BLAS (Debian's default
  # libblas is the slow reference implementation)
  python3-numpy python3-torch libopenblas0
  # real data for the IDX reader's test and bench/mnist: Fashion-MNIST in IDX format
  dataset-fashion-mnist
  # distributed training: MPI, and mpirun for the multi-process tests
  libopenmpi-dev openmpi-bin
  # the loom command (tools/): command line, JSON, HTTP serving; wrk loads it in bench/serve.py
  libcli11-dev nlohmann-json3-dev libcpp-httplib-dev wrk
  # ImageDeserializer decodes and transforms images with OpenCV; bench/image_reader's peer is
  # torchvision's ImageFolder
  libopencv-dev python3-torchvision
  # ONNX: the code is generated from libonnx-dev's onnx.proto; tests check the files with the
  # onnx checker and OpenCV's importer; `loom plot` renders graphs with graphviz's dot
  libonnx-dev python3-onnx python3-opencv graphviz
  # the Python package (python/): bindings, numpy/scipy data, its tests, pip install offline
  pybind11-dev python3-pybind11 python3-dev python3-scipy python3-pytest python3-setuptools
  python3-wheel python3-pip python3-venv
  # the C# client (bindings/csharp): Mono's mcs and runtime (mono-mcs brings mscorlib, System
  # and System.Core, all the client uses; mono-devel is not needed); the Java client
  # (bindings/java): javac, java and jni.h
  mono-mcs openjdk-17-jdk-headless
)
# Node.js runs onnxruntime in the ONNX test (a Node.js that brings its own npm is kept).
command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# onnxruntime for tests/e2e/onnx_test.py, from npm (its CPU library is in the package; the
# install script, which only downloads GPU libraries, is not run). The test skips onnxruntime,
# saying so, when this folder lacks it (LOOM_NPM_PREFIX names another one).
npm_prefix="${LOOM_NPM_PREFIX:-/opt/loom-npm}"
if [ ! -d "$npm_prefix/node_modules/onnxruntime-node" ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && [ ! -w "$(dirname "$npm_prefix")" ] && SUDO=sudo
  $SUDO mkdir -p "$npm_prefix"
  $SUDO npm install --prefix "$npm_prefix" --ignore-scripts --no-audit --no-fund \
    onnxruntime-node@1.30.0 ||
    echo "setup.sh: npm could not install onnxruntime-node; the ONNX test will skip onnxruntime"
fi
