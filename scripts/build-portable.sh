#!/usr/bin/env bash
# Builds the fusejit program and test binary into build-gpu/ so that they run
# on a machine without our Debian libraries (the GPU machine lent by the
# `device` tool has the CUDA driver and toolkit but no abseil or fmt):
# libstdc++ and libgcc are linked statically, and the shared abseil, fmt and
# GoogleTest libraries the binaries need are copied into build-gpu/lib,
# which the binaries find through their RPATH ($ORIGIN/lib, $ORIGIN/../lib).
# The tests name example files by this checkout's absolute path, which
# build-gpu/source-dir.txt records; scripts/gpu-check.sh links it there.
#
#   scripts/build-portable.sh        # then carry: build-gpu/fusejit build-gpu/tests/fusejit_tests
#                                    #             build-gpu/lib build-gpu/source-dir.txt
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  '-DCMAKE_BUILD_RPATH=$ORIGIN/lib;$ORIGIN/../lib' \
  '-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc' >/dev/null
cmake --build build-gpu -j "${FUSEJIT_JOBS:-2}" --target fusejit_cli fusejit_tests
mkdir -p build-gpu/lib
for binary in build-gpu/fusejit build-gpu/tests/fusejit_tests; do
  ldd "$binary" | awk '/=> \// { print $3 }' | grep -E 'libabsl|libfmt|libgtest|libgmock' | while read -r lib; do
    cp -Lu "$lib" build-gpu/lib/
  done
done
pwd >build-gpu/source-dir.txt
du -sh build-gpu/fusejit build-gpu/tests/fusejit_tests build-gpu/lib
