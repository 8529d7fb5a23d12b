#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, as one script for a machine that has
# one and nothing from the network. It uses a build folder carried from the
# development machine (default build/; the device has the CUDA driver and
# toolkit but none of our Debian libraries), runs the tests that a GPU
# un-skips, compiles every example's kernels for the GPU's architecture,
# and writes a short report to $OUT (default gpu-check-out/).
#
#   scripts/gpu-check.sh [BUILD_DIR]
#
# Every example runs on the GPU against the reference interpreter inside the
# GpuBackend tests (each example in f32, f16 and bf16, fused and unfused,
# plus the demo example at its real size). Benchmarks are not covered yet.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${OUT:-gpu-check-out}
mkdir -p "$out"
report="$out/report.md"
status=0

{
  echo "# fusejit GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv 2>&1 || echo "nvidia-smi failed"
  echo '```'
} >"$report"

if [[ ! -x "$build/tests/fusejit_tests" || ! -x "$build/fusejit" ]]; then
  echo "gpu-check: no build in $build; build with scripts/build.sh first and carry it" | tee -a "$report"
  exit 1
fi

echo "## GPU tests" >>"$report"
# CudaDriver*: the driver wrappers; CudaBackend*, CudaCublas*: the backend's
# launch arithmetic and cuBLAS loading; Gpu*: the CUDA backend on this GPU,
# every example against the reference (GpuBackend.*).
"$build/tests/fusejit_tests" --gtest_filter='CudaDriver*:CudaBackend*:CudaCublas*:Gpu*' --gtest_brief=1 \
  >"$out/gpu-tests.log" 2>&1 || status=1
grep -E '^\[ +(FAILED|gpu|device|copy|kernel|cublas) ' "$out/gpu-tests.log" | sed 's/^/    /' >>"$report"
tail -n 5 "$out/gpu-tests.log" | sed 's/^/    /' >>"$report"

# ---- PLACEHOLDER: benchmarks on the GPU (to be filled in once the CLI has
# `--backend cuda`), one line per example, e.g.
#   "$build/fusejit" bench "$graph" --backend cuda --json >"$out/bench-$(basename "$graph" .fj).json" || status=1
# ----

echo "## Kernels of every example, compiled for this GPU" >>"$report"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')
for graph in examples/graphs/*.fj; do
  echo "### $graph" >>"$report"
  "$build/fusejit" emit "$graph" --arch "sm_${arch:-90}" --out "${TMPDIR:-/tmp}/fusejit-gpu-check/$(basename "$graph" .fj)" \
    >>"$report" 2>&1 || status=1
done

echo "gpu-check: report in $report (exit $status)"
exit "$status"
