#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, as one script for a machine that has
# one and nothing from the network. It uses a build folder carried from the
# development machine (default build/; the device has the CUDA driver and
# toolkit but none of our Debian libraries), runs the tests that a GPU
# un-skips, compiles every example's kernels for the GPU's architecture,
# and writes a short report to $OUT (default gpu-check-out/).
#
#   scripts/gpu-check.sh [BUILD_DIR]     # build-gpu/ from scripts/build-portable.sh
#
# GPU_CHECK_GRAPHS (a folder of .fj files, default examples/graphs) and
# GPU_CHECK_DEMO_ARGS (added to every `fusejit demo`, e.g. "--rows 128") let
# tests/gpu_check/run_on_emulator.sh run the whole script small on the
# CUDA emulator, so that it works the first time a GPU is lent.
#
# Through the `device` tool: scripts/build-portable.sh here, then run
#   OUT=$OUT bash scripts/gpu-check.sh build-gpu
# carrying build-gpu/fusejit, build-gpu/tests/fusejit_tests and
# build-gpu/source-dir.txt. Each step has its own time limit (a hung kernel
# costs minutes, not the lease) and the report grows as steps finish.
#
# Every example runs on the GPU against the reference interpreter inside the
# GpuBackend tests (each example in f32, f16 and bf16, fused and unfused,
# plus the demo example at its real size), then `fusejit bench` times every
# example and the demo, and bench/peers/torch_peers.py times PyTorch eager
# and torch.compile beside it. Copy the figures to bench/results/.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
final_out=${OUT:-gpu-check-out}
mkdir -p "$final_out"
report="$final_out/report.md"
status=0
# The device tool brings back at most 8 files from $OUT: the logs, JSON and
# chart are written to a scratch folder and packed into one archive beside
# the report when the script ends (also when it is stopped).
out=$(mktemp -d "${TMPDIR:-/tmp}/fusejit-gpu-check.XXXXXX")
trap 'tar -czf "$final_out/details.tar.gz" -C "$out" . 2>/dev/null; rm -rf "$out"' EXIT
started=$SECONDS
graphs_dir=${GPU_CHECK_GRAPHS:-examples/graphs}
read -r -a demo_args <<<"${GPU_CHECK_DEMO_ARGS:-}"
section() { echo "## $1 (at $((SECONDS - started)) s)" >>"$report"; }

{
  echo "# fusejit GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv 2>&1 || echo "nvidia-smi failed"
  ldd --version 2>&1 | head -n 1
  echo '```'
} >"$report"

# A portable build (scripts/build-portable.sh) names examples by the absolute
# path of the checkout it was built in; make that path lead here.
if [[ -f "$build/source-dir.txt" ]]; then
  built_in=$(cat "$build/source-dir.txt")
  if [[ "$built_in" != "$PWD" && ! -e "$built_in" ]]; then
    mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in" || echo "gpu-check: cannot link $built_in" >&2
  fi
fi

# libcupti (HBM byte counters in `fusejit bench`) is loaded by soname first;
# toolkits keep it where the loader may not look.
cuda_home=${CUDA_HOME:-/usr/local/cuda}
for dir in "$cuda_home/lib64" "$cuda_home/extras/CUPTI/lib64"; do
  [[ -d "$dir" ]] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done

if [[ ! -x "$build/tests/fusejit_tests" || ! -x "$build/fusejit" ]]; then
  echo "gpu-check: no build in $build; build with scripts/build.sh first and carry it" | tee -a "$report"
  exit 1
fi

section "GPU tests"
# CudaDriver*: the driver wrappers; CudaBackend*, CudaCublas*: the backend's
# launch arithmetic and cuBLAS loading; DramCounters*: CUPTI loading; Gpu*: the
# CUDA backend on this GPU (HBM byte counters included),
# every example against the reference (GpuBackend.*).
# (ctest's emulated_gpu.tests runs the same suites on the CUDA emulator.)
# The CUPTI counters run on their own: a crash inside libcupti must not take
# the other tests' results with it.
run_tests() {  # LOG FILTER [ARGS...]
  local log=$1 filter=$2
  shift 2
  timeout -k 10 300 "$build/tests/fusejit_tests" --gtest_filter="$filter" "$@" >"$out/$log" 2>&1
  local rc=$?
  ((rc == 0)) || status=1
  ((rc == 124)) && echo "    $log: stopped after 300 s" >>"$report"
  ((rc >= 128)) && echo "    $log: the test program died with signal $((rc - 128)); its last lines:" >>"$report" &&
    tail -n 5 "$out/$log" | sed 's/^/      /' >>"$report"
  grep -E '^\[ +(FAILED|gpu|device|copy|counters|kernel|cublas) ' "$out/$log" | sed 's/^/    /' >>"$report"
  grep -E '^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ test' "$out/$log" | sed 's/^/    /' >>"$report"
}
run_tests gpu-tests.log 'CudaDriver*:CudaBackend*:CudaCublas*:DramCounters*:Gpu*-*MeasuredBytes*' --gtest_brief=1
run_tests gpu-counters.log '*MeasuredBytes*'

section "Benchmarks: fused against unfused on this GPU"
# Every example, then the demo (by default at its GPU size, [16384, 4096]
# bf16). Each run checks both plans against the reference before timing
# them. Should reading the HBM counters crash (signal exit), the rest run
# without them.
counters=""
for graph in "$graphs_dir"/*.fj; do
  name=$(basename "$graph" .fj)
  timeout -k 10 120 "$build/fusejit" bench "$graph" --backend cuda --reps 20 $counters --json \
    >"$out/bench-$name.json" 2>"$out/bench-$name.err"
  rc=$?
  if ((rc >= 128)) && [[ -z "$counters" ]]; then
    echo "    $name: bench died with signal $((rc - 128)); again without the HBM counters" >>"$report"
    counters="--no-counters"
    timeout -k 10 120 "$build/fusejit" bench "$graph" --backend cuda --reps 20 $counters --json \
      >"$out/bench-$name.json" 2>"$out/bench-$name.err"
    rc=$?
  fi
  if ((rc != 0)); then
    status=1
    why="exit $rc"
    ((rc == 124)) && why="stopped after 120 s"
    echo "    $name: bench failed ($why): $(tail -n 1 "$out/bench-$name.err")" >>"$report"
    continue
  fi
  python3 - "$out/bench-$name.json" "$name" >>"$report" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f, u = j["fused"], j["unfused"]
print(f"    {sys.argv[2]:<30} unfused {u['measured_us_median']:9.1f} us  fused {f['measured_us_median']:9.1f} us  "
      f"speedup {j['speedup_measured']:.2f}x (predicted {j['speedup_predicted']:.2f}x)  fused {f['effective_gbps']:.0f} GB/s "
      f"= {100 * f['effective_gbps'] / j['ceiling_gbps']:.0f}% of the {j['ceiling_gbps']:.0f} GB/s copy  "
      f"max rel error {j['max_rel_error']:.2g}")
if f["measured_bytes"] is not None and u["measured_bytes"] is not None:
    print(f"    {'':<30} HBM bytes from the counters: unfused {u['measured_bytes'] / u['bytes']:.3f}x, "
          f"fused {f['measured_bytes'] / f['bytes']:.3f}x the predicted")
else:
    print(f"    {'':<30} HBM bytes not measured: {j['measured_bytes_note']}")
PY
done
timeout -k 10 120 "$build/fusejit" demo --backend cuda --reps 20 "${demo_args[@]}" $counters \
  --plot "$final_out/roofline-demo.svg" >"$out/demo.txt" 2>&1 || status=1
sed -n '/^measured:/,$p' "$out/demo.txt" | sed 's/^/    /' >>"$report"

section "The demo kernel in other shapes (FUSEJIT_ROW_BLOCK_THREADS, FUSEJIT_ROW_PREFETCH)"
# The default gives each of 512 threads one 16-byte chunk of the row and
# loads a row only when the last one is done; the alternatives trade
# registers, occupancy and loads in flight differently. Each run checks
# both plans against the reference as always.
for shape in 512:0 512:1 256:0 256:1 1024:0; do
  threads=${shape%:*} prefetch=${shape#*:}
  tag="threads-$threads-prefetch-$prefetch"
  if FUSEJIT_ROW_BLOCK_THREADS=$threads FUSEJIT_ROW_PREFETCH=$prefetch timeout -k 10 90 "$build/fusejit" demo \
    --backend cuda --reps 20 "${demo_args[@]}" --no-counters --json >"$out/demo-$tag.json" 2>"$out/demo-$tag.err"; then
    python3 - "$out/demo-$tag.json" "$threads threads, prefetch $prefetch" >>"$report" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f = j["fused"]
print(f"    {sys.argv[2]:<28} fused {f['measured_us_median']:8.1f} us, {f['effective_gbps']:.0f} GB/s "
      f"= {100 * f['effective_gbps'] / j['ceiling_gbps']:.0f}% of the copy")
PY
  else
    status=1
    echo "    $tag: bench failed: $(tail -n 1 "$out/demo-$tag.err")" >>"$report"
  fi
done

section "Peers: PyTorch eager and torch.compile on the same graphs"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  PYTHONUNBUFFERED=1 timeout -k 10 300 python3 bench/peers/torch_peers.py --fusejit "$build/fusejit" \
    --device cuda --fusejit-results "$out" --json "$out/peers.json" "$graphs_dir"/*.fj >"$out/peers.txt" 2>&1 || status=1
  sed 's/^/    /' "$out/peers.txt" >>"$report"
else
  echo "    PyTorch with CUDA is not available here; peers skipped" >>"$report"
fi

section "Kernels of every example, compiled for this GPU"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')
for graph in "$graphs_dir"/*.fj; do
  echo "### $graph" >>"$report"
  timeout -k 10 60 "$build/fusejit" emit "$graph" --arch "sm_${arch:-90}" --out "$out/emit/$(basename "$graph" .fj)" \
    >>"$report" 2>&1 || status=1
done

section "End"
echo "gpu-check: report in $report, logs and JSON in $final_out/details.tar.gz (exit $status)"
exit "$status"
