#!/bin/bash
# Builds the fuzzers (the model loader's and the ONNX importer's) with clang++ in their own tree
# and runs each briefly, for half of the seconds, on seeds from make_seed_corpus.
# Usage: run_fuzz.sh <source root> <build folder> [seconds] [jobs].
# Exits 77 (ctest: skipped) when clang++ or libFuzzer is missing.
set -u
src=$1
build=$2
seconds=${3:-${LOOM_FUZZ_SECONDS:-20}}
jobs=${4:-2}
cxx=${LOOM_FUZZ_CXX:-clang++}

if ! command -v "$cxx" > /dev/null; then
  echo "SKIPPED: $cxx not found"
  exit 77
fi
mkdir -p "$build"
probe="$build/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  > "$probe"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe" -o "$build/probe" 2> "$build/probe.log"; then
  echo "SKIPPED: $cxx cannot build a libFuzzer target:"
  cat "$build/probe.log"
  exit 77
fi

set -e
if [ ! -f "$build/tree/build.ninja" ]; then
  cmake -S "$src/tests/fuzz" -B "$build/tree" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=None > "$build/configure.log"
fi
start=$(date +%s)
cmake --build "$build/tree" -j "$jobs"
echo "build: $(( $(date +%s) - start )) s"

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
rm -rf "$build/seeds" "$build/corpus"
mkdir -p "$build/corpus" "$build/artifacts"
"$build/tree/make_seed_corpus" "$build/seeds"  # seeds/model_loader, seeds/onnx_import
# CNTK's own small files seed the CNTK readers, v2 and v1 (the shared folder beside the
# source tree, where it exists).
for f in "$src"/../shared/cntk-models/v2_load_and_eval.dnn \
         "$src"/../shared/cntk-models/v2_initial_policy_network.dnn \
         "$src"/../shared/cntk-models/v1_MC.dnn "$src"/../shared/cntk-models/v1_LR_reg.dnn; do
  if [ -f "$f" ]; then cp "$f" "$build/seeds/model_loader/cntk_$(basename "$f")"; fi
done
# -malloc_limit_mb catches any single allocation a file could make too large; -timeout a hang.
# Each target's final stats give its runs per second (stat::average_exec_per_sec).
share=$(( seconds / 2 > 0 ? seconds / 2 : 1 ))  # 0 would be libFuzzer's "no limit"
for target in model_loader onnx_import; do
  cp -r "$build/seeds/$target" "$build/corpus/$target"
  set +e
  "$build/tree/${target}_fuzz" "$build/corpus/$target" -max_total_time="$share" \
    -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 -max_len=16384 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/${target}-" 2>&1 | grep -v "^#[0-9]*.*\(NEW\|REDUCE\|pulse\)\|NEW_FUNC"
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "FAILED: the $target fuzzer found a problem; the input is in $build/artifacts/"
    exit 1
  fi
done
echo "PASSED: no crash, leak, hang or oversized allocation in $seconds s"
