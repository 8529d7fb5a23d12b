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
# Not yet covered, because the GPU executor does not exist yet (issue 4):
# running every example on the GPU against the reference, and benchmarks.
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
"$build/tests/fusejit_tests" --gtest_filter='CudaDriver*:Gpu*' --gtest_brief=1 >"$out/gpu-tests.log" 2>&1 || status=1
tail -n 5 "$out/gpu-tests.log" | sed 's/^/    /' >>"$report"

echo "## Kernels of every example, compiled for this GPU" >>"$report"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')
for graph in examples/graphs/*.fj; do
  echo "### $graph" >>"$report"
  "$build/fusejit" emit "$graph" --arch "sm_${arch:-90}" --out "${TMPDIR:-/tmp}/fusejit-gpu-check/$(basename "$graph" .fj)" \
    >>"$report" 2>&1 || status=1
done

echo "gpu-check: report in $report (exit $status)"
exit "$status"
