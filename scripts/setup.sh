#!/usr/bin/env bash
# Installs every Debian package Loom's build, tests and benchmarks need. Idempotent.
set -euo pipefail
packages=(
  cmake ninja-build g++ clang clang-format libclang-rt-14-dev  # build, fuzzing, sanitizers
  libdnnl-dev libomp-dev zlib1g-dev                            # compute, threads, gzip data
  libgtest-dev                                                 # unit tests
  python3-numpy python3-torch                                  # reference peer for bench/
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
