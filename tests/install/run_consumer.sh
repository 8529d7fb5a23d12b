#!/usr/bin/env bash
# Installs the fusejit build in BUILD_DIR into a scratch prefix, then builds
# and runs tests/install/consumer against it with find_package(fusejit).
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
test -x "$work/prefix/bin/fusejit"
