#!/usr/bin/env bash
# Builds the fusejit program and test binary into build-gpu/ so that they run
# on a machine without our Debian libraries (the GPU machine lent by the
# `device` tool has the CUDA driver and toolkit but no abseil or fmt):
# abseil, GoogleTest, libstdc++ and libgcc are linked statically and fmt is
# used header-only (FUSEJIT_STATIC_DEPS), so the binaries need glibc alone;
# NVRTC, libcuda, cuBLAS and CUPTI are loaded with dlopen where they run.
# The tests name example files by this checkout's absolute path, which
# build-gpu/source-dir.txt records; scripts/gpu-check.sh links it there.
# The binaries are stripped, and the script fails when they and the checkout
# would not fit the 64 MiB the device tool carries.
#
#   scripts/build-portable.sh    # then carry: build-gpu/fusejit build-gpu/tests/fusejit_tests
#                                #             build-gpu/source-dir.txt
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEJIT_STATIC_DEPS=ON \
  '-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc' >/dev/null
cmake --build build-gpu -j "${FUSEJIT_JOBS:-2}" --target fusejit_cli fusejit_tests
pwd >build-gpu/source-dir.txt

# Anything but glibc among the shared libraries would be missing there.
status=0
for binary in build-gpu/fusejit build-gpu/tests/fusejit_tests; do
  extra=$(ldd "$binary" | grep -v -E 'linux-vdso|ld-linux|/lib(c|m|dl|pthread|rt)\.so' || true)
  if [[ -n "$extra" ]]; then
    echo "build-portable: $binary needs shared libraries besides glibc:" >&2
    echo "$extra" >&2
    status=1
  fi
  newest=$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -n 1)
  # 2.35: the static libgcc's _dl_find_object (cmake/portable/arc4random.cpp
  # keeps libstdc++'s arc4random, 2.36, out). Ubuntu 22.04 has 2.35.
  echo "build-portable: $binary needs glibc ${newest#GLIBC_} or newer"
  if [[ "$(printf '%s\n' "$newest" GLIBC_2.35 | sort -V | tail -n 1)" != GLIBC_2.35 ]]; then
    echo "build-portable: $binary needs a glibc newer than 2.35 (Ubuntu 22.04's)" >&2
    status=1
  fi
done
# The device tool carries at most 64 MiB (the checkout included): symbols
# are no use there, and the check says so before device time is spent.
strip build-gpu/fusejit build-gpu/tests/fusejit_tests
carried=$(du -cb build-gpu/fusejit build-gpu/tests/fusejit_tests build-gpu/source-dir.txt | tail -n 1 | cut -f1)
checkout=$( (git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null || true) | tail -n 1 | cut -f1)
echo "build-portable: carried binaries $((carried >> 20)) MiB + checkout $((checkout >> 20)) MiB (64 MiB may travel)"
if ((carried + checkout > 60 << 20)); then
  echo "build-portable: too large to carry to the GPU machine" >&2
  status=1
fi
exit "$status"
