#!/usr/bin/env bash
# Compiles here, before a GPU is lent, the CUDA kernels scripts/gpu-check.sh
# will compile there, into build-gpu/kernel-cache; carried with the build,
# gpu-check.sh uses it as FUSEJIT_CACHE_DIR, and every such NVRTC compile
# is a disk-cache hit on the GPU machine, which saves minutes of its
# device time. A kernel's cache key is its source, the NVRTC options, the
# architecture (sm_90: an H100's and an H200's), the NVRTC version and the
# fusejit version, so entries hit only where the GPU machine's NVRTC is
# this one's version; otherwise they are misses, compiled as without them.
#
# What it compiles: every example graph's fused and unfused kernels, in both
# access variants (16-byte and scalar), and in every launch shape that
# `emit --json` says a CUDA run times (launch_shapes_timed: only row
# kernels of 2^24 elements or more are tuned, runtime/cuda_row_tuning.h;
# of the examples only the demo is that large); the built-in demo in every
# launch shape, in bf16 and f32; and the GPU tests' kernels, by running
# them on the CUDA emulator. No kernel's source names its row count, so
# small runs compile the kernels of full-size ones. Everything runs the
# carried build-gpu/ binaries, so that the cached sources are the ones the
# GPU run generates; the emulator comes from build/.
#
#   scripts/build.sh && scripts/build-portable.sh && scripts/prefill-gpu-cache.sh
#   # then carry build-gpu/kernel-cache too
set -euo pipefail
cd "$(dirname "$0")/.."
emulator=$(find build/tests/cuda_emulator -maxdepth 1 -name 'libfusejit*.so' 2>/dev/null | head -n 1)
if [[ -z "$emulator" ]]; then
  echo "prefill-gpu-cache: needs the CUDA emulator of build/ (scripts/build.sh with the CUDA toolkit)" >&2
  exit 1
fi
fusejit=build-gpu/fusejit tests=build-gpu/tests/fusejit_tests
if [[ ! -x "$fusejit" || ! -x "$tests" ]]; then
  echo "prefill-gpu-cache: no $fusejit or $tests: run scripts/build-portable.sh first" >&2
  exit 1
fi
# Binaries older than the last change to the sources would cache kernels the
# GPU run never asks for.
changed=$(git log -1 --format=%ct -- src CMakeLists.txt)
for binary in "$fusejit" "$tests"; do
  if (($(stat -c %Y "$binary") < changed)); then
    echo "prefill-gpu-cache: $binary is older than the last change to src/: run scripts/build-portable.sh" >&2
    exit 1
  fi
done
cache=build-gpu/kernel-cache
rm -rf "$cache"
mkdir -p "$cache"
export FUSEJIT_CACHE_DIR=$PWD/$cache
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fusejit-prefill.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# "THREADS PREFETCH" of each launch shape other than the default that a CUDA
# run times for a kernel of an `emit --json` listing (its launch_shapes,
# where launch_shapes_timed: the row kernels of 2^24 elements or more).
timed_shapes() {  # JSON
  python3 - "$1" <<'PY'
import json, sys
shapes = []
for k in json.load(open(sys.argv[1]))["kernels"]:
    if k.get("launch_shapes_timed"):
        for s in k["launch_shapes"][1:]:
            shape = f"{s['threads_per_row']} {s['prefetch_rows']}"
            if shape not in shapes:
                shapes.append(shape)
print("\n".join(shapes))
PY
}
emits=0
emit() {  # GRAPH [ARGS...]: into a folder of its own; the JSON listing in $scratch/last.json
  "$fusejit" emit "$@" --arch sm_90 --json --out "$scratch/emit-$((++emits))" >"$scratch/last.json"
}
for graph in examples/graphs/*.fj; do
  echo "prefill-gpu-cache: $graph"
  for plan in "" --unfused; do
    emit "$graph" $plan --access scalar
    emit "$graph" $plan
    # The other launch shapes, as the variables force them (which is the
    # same source as the tuner's shape).
    while read -r threads prefetch; do
      [[ -n $threads ]] || continue
      FUSEJIT_ROW_BLOCK_THREADS=$threads FUSEJIT_ROW_PREFETCH=$prefetch emit "$graph" $plan
    done < <(timed_shapes "$scratch/last.json")
  done
done

# The built-in demo (its own names), through the CUDA backend on the
# emulator at 64 rows, in bf16 and f32, with every launch shape timed
# (FUSEJIT_AUTOTUNE=1 compiles them all, as gpu-check's full-size runs do;
# its runs that force a shape compile the same sources).
for dtype in bf16 f32; do
  echo "prefill-gpu-cache: demo, $dtype"
  FUSEJIT_CUDA_DRIVER=$emulator FUSEJIT_AUTOTUNE=1 "$fusejit" demo --backend cuda --rows 64 --reps 1 --no-counters \
    --dtype "$dtype" >/dev/null
done

echo "prefill-gpu-cache: the GPU tests on the CUDA emulator (a few minutes)"
FUSEJIT_CUDA_DRIVER=$emulator FUSEJIT_EXPECT_GPU=1 "$tests" --gtest_brief=1 \
  --gtest_filter='CudaBackend*:CudaCublas*:Gpu*-*MeasuredBytes*' >"$scratch/tests.log" 2>&1 ||
  { tail -n 20 "$scratch/tests.log" >&2; echo "prefill-gpu-cache: the emulated GPU tests failed" >&2; exit 1; }

# Only what the GPU machine can use: the CPU's calibration and compiled CPU
# kernels are this machine's.
find "$cache" -mindepth 1 -maxdepth 1 ! -name kernels -exec rm -rf {} +
find "$cache/kernels" -type f ! -name '*.fjkc' -delete
entries=$(find "$cache/kernels" -type f | wc -l)
bytes=$(du -sb "$cache" | cut -f1)
echo "prefill-gpu-cache: $entries kernels, $((bytes >> 20)) MiB in $cache"

# The device tool carries 64 MiB in all: the checkout (tracked files, and
# untracked ones git does not ignore), the binaries and this.
size_of() {  # FILES on stdin, NUL-separated: their bytes in all
  local total
  total=$(xargs -0 -r du -cb | tail -n 1 | cut -f1) || total=""
  echo "${total:-0}"
}
checkout=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | size_of)
binaries=$(printf '%s\0' "$fusejit" "$tests" | size_of)
total=$((checkout + binaries + bytes))
echo "prefill-gpu-cache: with the checkout and the binaries, $((total >> 20)) MiB to carry"
if ((total > 60 << 20)); then
  echo "prefill-gpu-cache: over the 64 MiB the device tool carries (less a margin); carry without the cache" >&2
  exit 1
fi
