#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, as one script for a machine that has
# one and nothing from the network. It uses a build folder carried from the
# development machine (default build-gpu/, from scripts/build-portable.sh: the
# device has the CUDA driver and toolkit but none of our Debian libraries),
# and writes a report to $OUT (default gpu-check-out/): report.md, the demo's
# roofline chart where gnuplot is installed, and details.tar.gz with every
# log and JSON file.
#
#   scripts/gpu-check.sh [BUILD_DIR]
#
# Through the `device` tool: scripts/build-portable.sh and
# scripts/prefill-gpu-cache.sh here, then run
#   OUT=$OUT bash scripts/gpu-check.sh build-gpu
# carrying build-gpu/fusejit, build-gpu/tests/fusejit_tests,
# build-gpu/source-dir.txt and build-gpu/kernel-cache, with a timeout_s
# above GPU_CHECK_BUDGET_S. The kernel cache (compiled here for sm_90) makes
# the NVRTC compiles of the run disk-cache hits where the GPU machine's
# NVRTC is this toolkit's version.
#
# Device time is short, so the script keeps to one budget
# (GPU_CHECK_BUDGET_S, default 480 s): every step's time limit is cut to what
# is left, a step that no longer fits is skipped and says so, and the steps
# that matter most come first: a first launch (which stops the script when
# the GPU cannot be used at all), the demo at its full size with the HBM
# counters, the GPU tests, `fusejit bench` of every example, PyTorch eager
# and torch.compile beside fusejit (bench/peers/torch_peers.py; issue 5
# asks for them), the demo kernel in other shapes and in f32, every
# example's kernels compiled for the
# GPU, and their SASS instructions per element (bench/sass_count.py, where
# the toolkit has cuobjdump) beside the cost model's estimate
# (bench/instruction_model.py). details.tar.gz is rewritten after each section, so a run killed
# outright still brings back all but the last section.
#
# GPU_CHECK_GRAPHS (a folder of .fj files, default examples/graphs),
# GPU_CHECK_DEMO_ARGS (added to every `fusejit demo`, e.g. "--rows 128"),
# GPU_CHECK_F32_ROWS (rows of the f32 dropout graphs, default 16384),
# GPU_CHECK_SHORT_ROW_ELEMENTS (elements of the short-row softmaxes,
# default 2^25) and
# GPU_CHECK_TIME_SCALE (see within() below) let
# tests/gpu_check/run_on_emulator.sh run the whole script small on the
# CUDA emulator, so that it works the first time a GPU is lent.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
final_out=${OUT:-gpu-check-out}
mkdir -p "$final_out"
report="$final_out/report.md"
status=0
started=$SECONDS
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-480}))
graphs_dir=${GPU_CHECK_GRAPHS:-examples/graphs}
read -r -a demo_args <<<"${GPU_CHECK_DEMO_ARGS:-}"

# The device tool brings back at most 8 files from $OUT: logs and JSON go to
# a scratch folder, packed into one archive beside the report after every
# section and when the script ends (also when it is stopped).
out=$(mktemp -d "${TMPDIR:-/tmp}/fusejit-gpu-check.XXXXXX")
tools=$(mktemp -d "${TMPDIR:-/tmp}/fusejit-gpu-check-tools.XXXXXX")
pack() {
  tar -czf "$final_out/details.tar.gz.part" -C "$out" . 2>/dev/null &&
    mv "$final_out/details.tar.gz.part" "$final_out/details.tar.gz"
}
own_cache=""  # a copy of the carried kernel cache, below
trap 'pack; rm -rf "$out" "$tools" ${own_cache:+"$own_cache"}' EXIT
section() {
  pack
  echo "## $1 (at $((SECONDS - started)) s)" >>"$report"
}
note() { echo "    $*" >>"$report"; }

# within SECONDS COMMAND...: runs COMMAND with a time limit of SECONDS, or
# of what is left of the budget (less a margin for packing) if that is less;
# exits 125 without running it when under 15 s would be left.
# GPU_CHECK_TIME_SCALE multiplies every step's own limit (the CUDA emulator
# is far slower than a GPU).
within() {
  local want=$(($1 * ${GPU_CHECK_TIME_SCALE:-1}))
  shift
  local left=$((deadline - SECONDS - 10))
  ((left < want)) && want=$left
  if ((want < 15)); then
    echo "gpu-check: skipped, the ${GPU_CHECK_BUDGET_S:-480} s budget is spent: $*" >&2
    return 125
  fi
  timeout -k 5 "$want" "$@"
}
# why RC: a few words on a non-zero exit status of within().
why() {
  case $1 in
    124) echo "stopped at its time limit" ;;
    137) echo "killed (its time limit, or out of memory)" ;;
    125) echo "skipped: the time budget is spent" ;;
    *) (($1 > 128)) && echo "died with signal $(($1 - 128))" || echo "exit $1" ;;
  esac
}

{
  echo "# fusejit GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo '```'
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv 2>&1 ||
    echo "nvidia-smi failed"
  ldd --version 2>&1 | head -n 1
  echo "CUDA libraries the loader knows:"
  ldconfig -p 2>/dev/null | grep -E 'lib(cuda|nvrtc|nvrtc-builtins|cublas|cublasLt|cupti|nvperf_host|nvperf_target)\.so' |
    sed 's/^/  /'
  echo '```'
} >"$report"

if [[ ! -x "$build/tests/fusejit_tests" || ! -x "$build/fusejit" ]]; then
  echo "gpu-check: no build in $build; build with scripts/build-portable.sh first and carry it" | tee -a "$report"
  exit 1
fi
build=$(realpath "$build")

# Kernels compiled before the lease (scripts/prefill-gpu-cache.sh), unless
# the caller chose a cache.
# Copied into a folder of this user's own: the carried files may belong to
# another uid on the device, and fusejit loads no kernels from a folder
# another user owns or may write to (runtime/kernel_cache.h).
if [[ -z "${FUSEJIT_CACHE_DIR:-}" && -d "$build/kernel-cache/kernels" ]]; then
  own_cache=$(mktemp -d "${TMPDIR:-/tmp}/fusejit-gpu-cache.XXXXXX")
  cp -r "$build/kernel-cache/." "$own_cache/"
  chmod -R go-w "$own_cache"
  export FUSEJIT_CACHE_DIR="$own_cache"
  echo "kernel cache: $(find "$own_cache/kernels" -name '*.fjkc' | wc -l) kernels compiled before the lease" \
    >>"$report"
fi

# A portable build (scripts/build-portable.sh) names examples by the absolute
# path of the checkout it was built in; make that path lead here.
if [[ -f "$build/source-dir.txt" ]]; then
  built_in=$(cat "$build/source-dir.txt")
  if [[ "$built_in" != "$PWD" && ! -e "$built_in" ]]; then
    mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in" || echo "gpu-check: cannot link $built_in" >&2
  fi
fi

# fusejit looks for NVRTC, cuBLAS and CUPTI by soname and in the toolkit's
# folders (runtime/shared_library.h). Where they are elsewhere (Python's
# nvidia-* wheels), only fusejit's own commands get them on
# LD_LIBRARY_PATH, through these wrappers: PyTorch keeps its own.
fusejit_libs=""
make_wrappers() {
  local name wrapper
  for name in fusejit tests/fusejit_tests; do
    wrapper="$tools/$(basename "$name")"
    echo '#!/bin/sh' >"$wrapper"
    if [[ -n "$fusejit_libs" ]]; then
      echo "LD_LIBRARY_PATH=\"$fusejit_libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\"; export LD_LIBRARY_PATH" >>"$wrapper"
    fi
    echo "exec \"$build/$name\" \"\$@\"" >>"$wrapper"
    chmod +x "$wrapper"
  done
}
make_wrappers
fusejit=$tools/fusejit
tests=$tools/fusejit_tests

# Python's nvidia-* wheels (PyTorch's CUDA) for each library the system
# lacks: looked for by soname and where fusejit looks itself.
system_has() {  # SONAME
  ldconfig -p 2>/dev/null | grep -qF "$1 " && return 0
  local dir
  for dir in "${CUDA_HOME:-/usr/local/cuda}" /usr/local/cuda; do
    for sub in lib64 lib extras/CUPTI/lib64; do [[ -e "$dir/$sub/$1" ]] && return 0; done
  done
  return 1
}
wheel_dirs() {  # PATTERN...: the folders of Python's nvidia-* wheels holding such files
  local site
  site=$(env -u LD_LIBRARY_PATH timeout 30 python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    2>/dev/null) || return 0
  [[ -d "$site/nvidia" ]] || return 0
  local pattern
  for pattern in "$@"; do
    find "$site/nvidia" -maxdepth 4 -name "$pattern" -printf '%h\n' 2>/dev/null
  done | sort -u | paste -sd:
}

section "First launch"
missing=()
for lib in libnvrtc.so.13 libcublas.so.13 libcublasLt.so.13 libcupti.so.13; do system_has "$lib" || missing+=("$lib*"); done
if ((${#missing[@]} > 0)); then
  fusejit_libs=$(wheel_dirs "${missing[@]}")
  note "not installed here: ${missing[*]}; from Python's wheels for fusejit: ${fusejit_libs:-none found}"
  make_wrappers
fi
# One tiny kernel through NVRTC and the driver: if this fails, nothing
# below can work, and the lease is better spent reading why.
printf 'input x: f32[4, 33]\ny = gelu(x)\noutput y\n' >"$tools/first.fj"
if ! within 60 "$fusejit" run "$tools/first.fj" --backend cuda >"$out/first-launch.txt" 2>&1; then
  note "fusejit could not launch a kernel: $(tail -n 2 "$out/first-launch.txt" | tr '\n' ' ')"
  note "stopping: every check below needs a first launch to work"
  exit 1
fi
sed 's/^/    /' "$out/first-launch.txt" | head -n 8 >>"$report"

section "The demo at its GPU size, with the HBM counters"
# By default [16384, 4096] bf16. The chart needs gnuplot, which the device
# image may lack: then the demo runs without it.
plot=()
if gnuplot --version >/dev/null 2>&1; then
  plot=(--plot "$final_out/roofline-demo.svg")
else
  note "no gnuplot here: no roofline chart (the demo's table says where each kernel sits)"
fi
within 150 "$fusejit" demo --backend cuda --reps 20 "${demo_args[@]}" "${plot[@]}" >"$out/demo.txt" 2>&1
rc=$?
# A crash inside libcupti (a signal, not its time limit) must not cost the
# headline result: the demo again without the counters.
if ((rc > 128 && rc != 137)); then
  note "demo with the HBM counters $(why $rc): again without them"
  mv "$out/demo.txt" "$out/demo-with-counters.txt"
  within 150 "$fusejit" demo --backend cuda --reps 20 "${demo_args[@]}" "${plot[@]}" --no-counters >"$out/demo.txt" 2>&1
  rc=$?
fi
((rc == 0)) || { status=1; note "demo failed ($(why $rc)): $(tail -n 1 "$out/demo.txt")"; }
sed -n '/^measured:/,$p' "$out/demo.txt" | sed 's/^/    /' >>"$report"

section "GPU tests"
# CudaDriver*: the driver wrappers; CudaBackend*, CudaCublas*: the backend's
# launch arithmetic and cuBLAS loading; DramCounters*: CUPTI loading; Gpu*:
# the CUDA backend on this GPU, every example against the reference
# (GpuBackend.*). (ctest's emulated_gpu.tests runs the same suites on the
# CUDA emulator.) DramCounters.CpuPlans* needs a host C++ compiler, which is
# not what this checks. The HBM counter tests run on their own: a crash inside
# libcupti must not take the other tests' results with it.
# FUSEJIT_EXPECT_GPU=1: a GPU test that finds no usable GPU fails, where it
# would skip elsewhere (tests/support/requirements.h), so that a run whose
# every test skipped does not read as passed.
export FUSEJIT_EXPECT_GPU=1
run_tests() {  # LOG SECONDS FILTER [ARGS...]
  local log=$1 seconds=$2 filter=$3
  shift 3
  within "$seconds" "$tests" --gtest_filter="$filter" "$@" >"$out/$log" 2>&1
  local rc=$?
  ((rc == 0)) || status=1
  ((rc != 0 && rc != 1)) && note "$log: $(why $rc); its last lines:" && tail -n 5 "$out/$log" | sed 's/^/      /' >>"$report"
  grep -E '^\[ +(FAILED|gpu|device|copy|counters|kernel|cublas|cublasLt|timing) ' "$out/$log" | sed 's/^/    /' >>"$report"
  grep -E '^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ test' "$out/$log" | sed 's/^/    /' >>"$report"
}
run_tests gpu-tests.log 240 'CudaDriver*:CudaBackend*:CudaCublas*:DramCounters*:Gpu*-*MeasuredBytes*:DramCounters.CpuPlans*' \
  --gtest_brief=1
run_tests gpu-counters.log 90 '*MeasuredBytes*'

section "Benchmarks: fused against unfused on this GPU"
# Every example. Each run checks both plans against the reference before
# timing them. Should reading the HBM counters crash (signal exit), the rest
# run without them.
summarize_bench() {  # JSON NAME: one report line, also for a run whose results were wrong
  python3 - "$1" "$2" >>"$report" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f, u = j["fused"], j["unfused"]
wrong = "" if j.get("correct", True) else "  WRONG RESULTS (see the .err file)"
num = lambda v, spec: "n/a" if v is None else format(v, spec)  # JSON null: NaN, or not measured
ceiling = j["ceiling_gbps"] or 0
share = f"{100 * f['effective_gbps'] / ceiling:.0f}%" if ceiling > 0 and f["effective_gbps"] is not None else "n/a"
print(f"    {sys.argv[2]:<30} unfused {num(u['measured_us_median'], '9.1f')} us  fused {num(f['measured_us_median'], '9.1f')} us  "
      f"speedup {num(j['speedup_measured'], '.2f')}x (predicted {num(j['speedup_predicted'], '.2f')}x)  "
      f"fused {num(f['effective_gbps'], '.0f')} GB/s = {share} of the {num(j['ceiling_gbps'], '.0f')} GB/s copy "
      f"(median; best {num(j.get('ceiling_best_gbps'), '.0f')})  "
      f"max rel error {num(j['max_rel_error'], '.2g')}{wrong}")
if f["measured_bytes"] is not None and u["measured_bytes"] is not None:
    print(f"    {'':<30} HBM bytes from the counters: unfused {u['measured_bytes'] / u['bytes']:.3f}x, "
          f"fused {f['measured_bytes'] / f['bytes']:.3f}x the predicted")
else:
    print(f"    {'':<30} HBM bytes not measured: {j['measured_bytes_note']}")
# Library kernels: whether a matmul with an epilogue ran on cuBLASLt or fell back (cublas+jit).
library = [f"{k['name']} {k['executed_by']} {num(k['measured_us_median'], '.1f')} us"
           for k in f["kernels"] if k.get("executed_by", "jit") != "jit"]
if library:
    print(f"    {'':<30} fused library kernels: {', '.join(library)}")
for k in f["kernels"]:  # why cuBLASLt did not run an epilogue
    if k.get("executed_by") == "cublas+jit":
        print(f"    {'':<30} {k['name']}: {k.get('library_call')}")
PY
}
counters=()
bench() {  # GRAPH NAME
  within 90 "$fusejit" bench "$1" --backend cuda --reps 20 "${counters[@]}" --json >"$out/bench-$2.json" \
    2>"$out/bench-$2.err"
}
for graph in "$graphs_dir"/*.fj; do
  name=$(basename "$graph" .fj)
  bench "$graph" "$name"
  rc=$?
  if ((rc > 128 && rc != 137)) && ((${#counters[@]} == 0)); then
    note "$name: bench $(why $rc); again without the HBM counters"
    counters=(--no-counters)
    bench "$graph" "$name"
    rc=$?
  fi
  ((rc == 0)) || status=1
  if ((rc == 125)); then
    note "$name: $(why $rc)"
  elif ((rc == 0 || rc == 1)) && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$out/bench-$name.json" 2>/dev/null; then
    summarize_bench "$out/bench-$name.json" "$name"
  else
    note "$name: bench failed ($(why $rc)): $(tail -n 1 "$out/bench-$name.err")"
  fi
done

section "Peers: PyTorch eager and torch.compile on the same graphs"
# PyTorch runs with the environment it came with (its own CUDA libraries).
if timeout 90 python3 -c "import torch; assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'" \
  >"$out/peers-probe.txt" 2>&1; then
  PYTHONUNBUFFERED=1 within 150 python3 bench/peers/torch_peers.py --fusejit "$fusejit" \
    --device cuda --fusejit-results "$out" --json "$out/peers.json" "$graphs_dir"/*.fj >"$out/peers.txt" 2>&1
  rc=$?
  ((rc == 0)) || { status=1; note "peers: $(why $rc)"; }
  sed 's/^/    /' "$out/peers.txt" >>"$report"
else
  note "PyTorch with CUDA is not available here; peers skipped: $(tail -n 1 "$out/peers-probe.txt")"
fi

section "The demo kernel in other shapes (FUSEJIT_ROW_BLOCK_THREADS, FUSEJIT_ROW_PREFETCH)"
# The default gives each of 512 threads one 16-byte chunk of the row and
# loads a row only when the last one is done; the alternatives trade
# registers, occupancy and loads in flight differently. The demo above timed
# these same shapes on its first run and kept the fastest (its "launch
# shapes" lines); here each is forced (which turns the tuning off) and
# benchmarked in full, as a check on that choice. The shapes are those
# `emit --json` lists for the demo example's kernel (launch_shapes), the
# built-in demo's twin at its default size. Each run checks both plans
# against the reference as always.
shapes=()
if within 60 "$fusejit" emit "$graphs_dir/bias_gelu_dropout_layernorm.fj" --json --out "$out/demo-shapes" \
  >"$out/demo-shapes.json" 2>"$out/demo-shapes.err"; then
  mapfile -t shapes < <(python3 - "$out/demo-shapes.json" <<'PY'
import json, sys
for s in json.load(open(sys.argv[1]))["kernels"][0]["launch_shapes"]:
    print(f"{s['threads_per_row']}:{s['prefetch_rows']}")
PY
  )
fi
((${#shapes[@]} > 0)) ||
  note "no launch shapes from emit --json of the demo example: $(tail -n 1 "$out/demo-shapes.err" 2>/dev/null)"
for shape in "${shapes[@]}"; do
  threads=${shape%:*} prefetch=${shape#*:}
  tag="threads-$threads-prefetch-$prefetch"
  FUSEJIT_ROW_BLOCK_THREADS=$threads FUSEJIT_ROW_PREFETCH=$prefetch within 60 "$fusejit" demo \
    --backend cuda --reps 20 "${demo_args[@]}" --no-counters --json >"$out/demo-$tag.json" 2>"$out/demo-$tag.err"
  rc=$?
  if ((rc == 0)); then
    python3 - "$out/demo-$tag.json" "$threads threads, $prefetch rows ahead" >>"$report" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f = j["fused"]
print(f"    {sys.argv[2]:<28} fused {f['measured_us_median']:8.1f} us, {f['effective_gbps']:.0f} GB/s "
      f"= {100 * f['effective_gbps'] / j['ceiling_gbps']:.0f}% of the copy")
PY
  else
    status=1
    note "$tag: demo failed ($(why $rc)): $(tail -n 1 "$out/demo-$tag.err")"
  fi
done

# The same chain in f32, where a thread takes 8 elements as two adjacent
# 16-byte accesses so that one Philox call decides them all
# (bench/results/2026-12-01-f32-dropout-width.md): is that access pattern
# as fast as one 16-byte access per thread?
within 60 "$fusejit" demo --backend cuda --reps 20 --dtype f32 "${demo_args[@]}" --no-counters --json \
  >"$out/demo-f32.json" 2>"$out/demo-f32.err"
rc=$?
if ((rc == 0)); then
  python3 - "$out/demo-f32.json" >>"$report" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f, u = j["fused"], j["unfused"]
print(f"    f32 demo: fused {f['measured_us_median']:8.1f} us, {f['effective_gbps']:.0f} GB/s "
      f"= {100 * f['effective_gbps'] / j['ceiling_gbps']:.0f}% of the copy; speedup {j['speedup_measured']:.2f}x "
      f"(predicted {j['speedup_predicted']:.2f}x)")
PY
else
  status=1
  note "f32 demo failed ($(why $rc)): $(tail -n 1 "$out/demo-f32.err")"
fi
# One graph's fused plan, benched without the counters: a report line with
# its time and bandwidth beside the copy's and its predicted time.
bench_one() {  # GRAPH NAME LABEL
  within 60 "$fusejit" bench "$1" --backend cuda --reps 20 --no-counters --json >"$out/bench-$2.json" \
    2>"$out/bench-$2.err"
  local rc=$?
  if ((rc == 0)); then
    python3 - "$out/bench-$2.json" "$3" >>"$report" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f = j["fused"]
print(f"    {sys.argv[2]}: {f['measured_us_median']:8.1f} us, "
      f"{f['effective_gbps']:.0f} GB/s = {100 * f['effective_gbps'] / j['ceiling_gbps']:.0f}% of the copy "
      f"(predicted {f['predicted_us']:.1f} us)")
PY
  else
    status=1
    note "$3: bench failed ($(why $rc)): $(tail -n 1 "$out/bench-$2.err")"
  fi
}

# The same question in isolation: f32 dropout alone with rows of 4096 (8 to a
# thread, two accesses) and of 4100 (4 to a thread, one access, half of
# each Philox call unused): bandwidth of each beside the copy's.
f32_rows=${GPU_CHECK_F32_ROWS:-16384}
for cols in 4096 4100; do
  printf 'input x: f32[%s, %s]\ny = dropout(x, p=0.1, seed=3)\noutput y\n' "$f32_rows" "$cols" >"$tools/dropout-$cols.fj"
  width=$( ((cols % 8 == 0)) && echo "8 to a thread" || echo "4 to a thread")
  bench_one "$tools/dropout-$cols.fj" "dropout-f32-$cols" "f32 dropout, rows of $cols ($width)"
done

# Rows shorter than a warp's 32 chunks share a warp (fusion/gpu_row_shape.h:
# a softmax over 8 experts takes one lane per row, over 64 columns 8):
# bf16 softmax over rows of 8, 64 and 256 (a whole warp), 64 MiB each.
short_elements=${GPU_CHECK_SHORT_ROW_ELEMENTS:-33554432}
for cols in 8 64 256; do
  printf 'input x: bf16[%s, %s]\ny = softmax(x)\noutput y\n' "$((short_elements / cols))" "$cols" \
    >"$tools/softmax-$cols.fj"
  bench_one "$tools/softmax-$cols.fj" "softmax-bf16-$cols" "bf16 softmax, rows of $cols"
done

section "Kernels of every example, compiled for this GPU"
arch=$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')
for graph in "$graphs_dir"/*.fj; do
  echo "### $graph" >>"$report"
  within 30 "$fusejit" emit "$graph" --arch "sm_${arch:-90}" --out "$out/emit/$(basename "$graph" .fj)" \
    >>"$report" 2>&1
  rc=$?
  ((rc == 0)) || { status=1; note "emit: $(why $rc)"; }
done

section "SASS instructions per element (bench/sass_count.py)"
# What each kernel issues per element, beside the bytes it moves: an H200
# stays memory-bound on a bf16 element below about 28 instructions
# (bench/results/2026-11-30-sass-budget.md). Needs the toolkit's cuobjdump.
demo_graph="$graphs_dir/bias_gelu_dropout_layernorm.fj"
if [[ -f "$demo_graph" ]]; then
  within 60 "$fusejit" emit "$demo_graph" --unfused --arch "sm_${arch:-90}" \
    --out "$out/emit-unfused/bias_gelu_dropout_layernorm" >/dev/null 2>>"$report"
fi
emitted_dirs=()
for dir in "$out"/emit/* "$out"/emit-unfused/*; do [[ -d "$dir" ]] && emitted_dirs+=("$dir"); done
if ((${#emitted_dirs[@]} > 0)); then
  within 90 python3 bench/sass_count.py "${emitted_dirs[@]}" >"$out/sass.txt" 2>&1
  rc=$?
  sed 's/^/    /' "$out/sass.txt" >>"$report"
  ((rc == 0)) || note "sass_count: $(why $rc); see its lines above (without cuobjdump there are no counts)"
else
  note "no emitted kernels to count"
fi
# The cost model's instructions per element (what it charges at the issue
# rate) beside the same count, kernel by kernel, for both plans of every
# example: how far the GPU predictions rest on a fitted estimate.
within 120 python3 bench/instruction_model.py --fusejit "$fusejit" "$graphs_dir"/*.fj >"$out/instruction-model.txt" 2>&1
rc=$?
sed 's/^/    /' "$out/instruction-model.txt" >>"$report"
((rc == 0)) || note "instruction_model: $(why $rc); see its lines above"

section "End"
echo "gpu-check: report in $report, logs and JSON in $final_out/details.tar.gz (exit $status)" | tee -a "$report"
exit "$status"
