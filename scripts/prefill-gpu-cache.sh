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
# What it compiles: every example graph's fused and unfused kernels, in the
# launch shapes a row kernel is tuned over (FUSEJIT_ROW_BLOCK_THREADS,
# FUSEJIT_ROW_PREFETCH) and the scalar variant; the demo in bf16 and f32;
# and the GPU tests' kernels, by running them on the CUDA emulator. A
# kernel's source depends on its row length, not its row count, so small
# runs compile the kernels of full-size ones.
#
#   scripts/build.sh && scripts/build-portable.sh && scripts/prefill-gpu-cache.sh
#   # then carry build-gpu/kernel-cache too
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FUSEJIT_BUILD_DIR:-build}
cache=build-gpu/kernel-cache
emulator=$(ls "$build"/tests/cuda_emulator/libfusejit*.so 2>/dev/null | head -n 1 || true)
if [[ ! -x "$build/fusejit" || ! -x "$build/tests/fusejit_tests" || -z "$emulator" ]]; then
  echo "prefill-gpu-cache: needs $build/ built with the CUDA toolkit (scripts/build.sh)" >&2
  exit 1
fi
rm -rf "$cache"
mkdir -p "$cache"
export FUSEJIT_CACHE_DIR=$PWD/$cache
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fusejit-prefill.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# The shapes cuda_row_shape_candidates() tunes a block-per-row kernel over,
# as the variables force them: "THREADS PREFETCH".
shapes=("- 0" "256 0" "1024 0" "- 1" "256 1")
emits=0
emit() {  # GRAPH [ARGS...]: each emit into a folder of its own
  local graph=$1 shape threads prefetch
  shift
  for shape in "${shapes[@]}"; do
    read -r threads prefetch <<<"$shape"
    [[ $threads == - ]] && threads=""
    for plan in "" --unfused; do
      FUSEJIT_ROW_BLOCK_THREADS=$threads FUSEJIT_ROW_PREFETCH=$prefetch "$build/fusejit" emit "$graph" --arch sm_90 \
        $plan --out "$scratch/emit-$((++emits))" "$@" >/dev/null
    done
  done
  for plan in "" --unfused; do
    "$build/fusejit" emit "$graph" --arch sm_90 --access scalar $plan --out "$scratch/emit-$((++emits))" >/dev/null
  done
}
for graph in examples/graphs/*.fj; do
  echo "prefill-gpu-cache: $graph"
  emit "$graph"
done

# The demo in both dtypes, through the CUDA backend on the emulator (at 64
# rows: the same kernels as at 16384), in each launch shape.
for dtype in bf16 f32; do
  for shape in "${shapes[@]}"; do
    read -r threads prefetch <<<"$shape"
    [[ $threads == - ]] && threads=""
    echo "prefill-gpu-cache: demo $dtype, threads ${threads:-default}, prefetch $prefetch"
    FUSEJIT_CUDA_DRIVER=$emulator FUSEJIT_ROW_BLOCK_THREADS=$threads FUSEJIT_ROW_PREFETCH=$prefetch \
      "$build/fusejit" demo --backend cuda --rows 64 --dtype "$dtype" --reps 1 --no-counters >/dev/null
  done
done

echo "prefill-gpu-cache: the GPU tests on the CUDA emulator (a few minutes)"
FUSEJIT_CUDA_DRIVER=$emulator "$build/tests/fusejit_tests" --gtest_brief=1 \
  --gtest_filter='CudaBackend*:CudaCublas*:Gpu*-*MeasuredBytes*' >"$scratch/tests.log" 2>&1 ||
  { tail -n 20 "$scratch/tests.log" >&2; echo "prefill-gpu-cache: the emulated GPU tests failed" >&2; exit 1; }

# Only what the GPU machine can use: the CPU's calibration and compiled CPU
# kernels are this machine's.
find "$cache" -mindepth 1 -maxdepth 1 ! -name kernels -exec rm -rf {} +
find "$cache/kernels" -type f ! -name '*.fjkc' -delete
entries=$(find "$cache/kernels" -type f | wc -l)
bytes=$(du -sb "$cache" | cut -f1)
echo "prefill-gpu-cache: $entries kernels, $((bytes >> 20)) MiB in $cache"

# The device tool carries 64 MiB in all: the checkout, the binaries and this.
checkout=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
binaries=$(du -cb build-gpu/fusejit build-gpu/tests/fusejit_tests 2>/dev/null | tail -n 1 | cut -f1)
total=$((checkout + binaries + bytes))
echo "prefill-gpu-cache: with the checkout and the binaries, $((total >> 20)) MiB to carry"
if ((total > 60 << 20)); then
  echo "prefill-gpu-cache: over the 64 MiB the device tool carries (less a margin); carry without the cache" >&2
  exit 1
fi
