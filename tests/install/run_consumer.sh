#!/usr/bin/env bash
# Installs the fusejit build in BUILD_DIR into a scratch prefix, then builds
# and runs tests/install/consumer against it with find_package(fusejit),
# and once more against BUILD_DIR itself (fusejit_DIR pointing at it).
# The prefix must hold the public headers (fusejit.h and what it includes)
# and none of the internal ones.
# Usage: run_consumer.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
work="$build/install-test"
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" >/dev/null
out=$("$work/consumer/consumer")
echo "$out"
grep -q "softmax" <<<"$out"
grep -q "on the cpu backend: max relative error" <<<"$out"
grep -q "bytes of C++ ([0-9]* work items), [0-9]* bytes of CUDA" <<<"$out"
grep -q "speedup of fused over unfused: measured" <<<"$out"
test -x "$work/prefix/bin/fusejit"
# Captured first: a command substitution inside <<< loses the exit code.
plugin_out=$("$work/consumer/consumer_of_plugin")
grep -q "in a shared library: max relative error" <<<"$plugin_out"
# The build tree is a package too (export() in CMakeLists.txt).
cmake -S "$src/tests/install/consumer" -B "$work/consumer-build-tree" -G Ninja \
  -Dfusejit_DIR="$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer-build-tree" >/dev/null
build_tree_out=$("$work/consumer-build-tree/consumer")
grep -q "on the cpu backend: max relative error" <<<"$build_tree_out"
headers="$work/prefix/include/fusejit"
for public in fusejit.h fusejit_version.h ir/graph.h ir/ops.def runtime/backend.h fusion/plan.h codegen/cpu/cpu_emitter.h; do
  test -f "$headers/$public" || { echo "not installed: $public"; exit 1; }
done
for internal in runtime/thread_pool.h runtime/sha256.h codegen/cuda/fj_math.cuh codegen/cpu/fj_kernel.h cli/commands.h; do
  ! test -e "$headers/$internal" || { echo "installed, but internal: $internal"; exit 1; }
done
