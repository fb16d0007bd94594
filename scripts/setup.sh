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
  # the Python package (python/): bindings, numpy/scipy data, its tests, pip install offline
  pybind11-dev python3-pybind11 python3-dev python3-scipy python3-pytest python3-setuptools
  python3-wheel python3-pip python3-venv
)
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
