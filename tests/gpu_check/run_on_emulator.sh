#!/usr/bin/env bash
# scripts/gpu-check.sh end to end on the CUDA emulator, so that the script
# works the first time a GPU is lent (device time is short, and a script
# that fails halfway wastes it): a stand-in nvidia-smi, a gnuplot that does
# not work (the device image has none), the example graphs shrunk to a few
# thousand elements, the demo at 128 x 256. The script must exit 0, run
# every part, and leave the report and one archive with every example's and
# every demo shape's JSON. Then, with a budget too small for anything, it
# must stop at once, say why, and still leave the archive.
#
#   run_on_emulator.sh SOURCE_DIR BUILD_DIR EMULATOR_LIBRARY
set -euo pipefail
source_dir=$1 build_dir=$2 emulator=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/fusejit-gpu-check-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/graphs" "$work/out" "$work/details"

cat >"$work/bin/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
  *compute_cap*) echo "9.0" ;;
  *) echo "name, driver_version"; echo "fusejit CUDA emulator, none" ;;
esac
SMI
printf '#!/bin/sh\necho "gnuplot: not installed (a stand-in)" >&2\nexit 127\n' >"$work/bin/gnuplot"
# This toolkit has no cuobjdump; a stand-in that prints one loop lets the
# SASS section run its whole path (emit, ptxas, parse) where the device's
# toolkit has a real one. A toolkit that has cuobjdump uses its own.
cat >"$work/bin/cuobjdump" <<'SASS'
#!/bin/sh
cat <<'LISTING'
        code for sm_90
                Function : stand_in
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.128 R4, [R2.64] ;
        /*0020*/                   FADD R4, R4, R5 ;
        /*0030*/                   STG.E.128 [R2.64], R4 ;
        /*0040*/              @!P0 BRA 0x10 ;
        /*0050*/                   EXIT ;
LISTING
SASS
chmod +x "$work/bin/nvidia-smi" "$work/bin/gnuplot" "$work/bin/cuobjdump"

# Every extent of the examples, scaled down: one table so that operands that
# must agree (a bias and its rows' width) still do.
python3 - "$source_dir/examples/graphs" "$work/graphs" <<'PY'
import pathlib, re, sys
small = {8192: 64, 4096: 256, 3072: 384, 2048: 32, 1024: 128, 768: 96, 512: 64, 256: 32, 16: 2}
for graph in pathlib.Path(sys.argv[1]).glob("*.fj"):
    shrink = lambda shape: re.sub(r"\d+", lambda n: str(small.get(int(n.group()), int(n.group()))), shape.group())
    (pathlib.Path(sys.argv[2]) / graph.name).write_text(re.sub(r"\[[\d, ]*\]", shrink, graph.read_text()))
PY

status=0
PATH="$work/bin:$PATH" FUSEJIT_CUDA_DRIVER="$emulator" GPU_CHECK_GRAPHS="$work/graphs" \
  GPU_CHECK_DEMO_ARGS="--rows 128 --cols 256" GPU_CHECK_F32_ROWS=16 GPU_CHECK_SHORT_ROW_ELEMENTS=4096 \
  GPU_CHECK_BUDGET_S=5000 GPU_CHECK_TIME_SCALE=8 \
  OUT="$work/out" \
  bash "$source_dir/scripts/gpu-check.sh" "$build_dir" >"$work/gpu-check.log" 2>&1 || status=$?
report="$work/out/report.md"
fail() {
  echo "FAIL: $*"
  echo "--- gpu-check output"; cat "$work/gpu-check.log"
  echo "--- report"; cat "$report" 2>/dev/null || true
  exit 1
}
((status == 0)) || fail "gpu-check.sh exited $status"
tar -xzf "$work/out/details.tar.gz" -C "$work/details" || fail "no readable details.tar.gz"
for section in "GPU tests" "Benchmarks" "other shapes" "Peers" "Kernels of every example" "SASS instructions" "End"; do
  grep -q "^## .*$section" "$report" || fail "the report has no section '$section'"
done
grep -q 'PASSED  \] [1-9][0-9]* tests' "$report" || fail "the report shows no passed GPU tests"
! grep -q 'FAILED\|failed' "$report" || fail "the report shows a failure"
for graph in "$work"/graphs/*.fj; do
  name=$(basename "$graph" .fj)
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["correct"], "wrong results"' \
    "$work/details/bench-$name.json" || fail "bench-$name.json is missing or says the results are wrong"
  grep -q "^    $name .*speedup" "$report" || fail "the report has no line for $name"
done
# One forced run per launch shape that emit --json lists for the demo
# example's kernel (at the shrunk size a warp per row: its one shape).
shapes=$(ls "$work"/details/demo-threads-*.json | wc -l)
listed=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["kernels"][0]["launch_shapes"]))' \
  "$work/details/demo-shapes.json") || fail "no demo-shapes.json with the demo example's launch shapes"
((shapes == listed && shapes >= 1)) || fail "$shapes demo shapes measured, not the $listed emit listed"
grep -q "^    f32 demo: fused .* speedup" "$report" || fail "the report has no line for the f32 demo"
for cols in 4096 4100; do
  grep -q "^    f32 dropout, rows of $cols .* of the copy" "$report" || fail "the report has no line for f32 dropout, rows of $cols"
done
for cols in 8 64 256; do
  grep -q "^    bf16 softmax, rows of $cols: .* of the copy" "$report" || fail "the report has no line for softmax, rows of $cols"
done
grep -q "no gnuplot here" "$report" || fail "the report does not say why there is no chart"
grep -q "^    measured:" "$report" || fail "the report has no measured figures from the demo"
grep -q "^    k0_add_gelu_dropout_layer_norm .* loop instructions, .* per element" "$report" ||
  fail "the report has no SASS count of the demo kernel"
grep -q "^    [0-9]* kernels: model/SASS from" "$report" || fail "the report does not set the instruction model beside the count"
emitted=$(ls "$work"/details/emit/*/plan.txt 2>/dev/null | wc -l)
((emitted == $(ls "$work"/graphs/*.fj | wc -l))) || fail "$emitted examples' kernels emitted into the archive"
sections=$(grep -c '^## ' "$report")

# A budget that leaves no step its 15 s: the first launch is skipped, and
# the script stops there, says why, and still packs what it has.
rm -rf "$work/out" && mkdir "$work/out"
status=0
PATH="$work/bin:$PATH" FUSEJIT_CUDA_DRIVER="$emulator" GPU_CHECK_GRAPHS="$work/graphs" GPU_CHECK_BUDGET_S=20 \
  OUT="$work/out" bash "$source_dir/scripts/gpu-check.sh" "$build_dir" >"$work/gpu-check.log" 2>&1 || status=$?
((status == 1)) || fail "with a spent budget gpu-check.sh exited $status, not 1"
grep -q "budget is spent" "$report" || fail "with a spent budget the report does not say so"
grep -q "stopping" "$report" || fail "with a spent budget the script did not stop"
tar -tzf "$work/out/details.tar.gz" | grep -q first-launch.txt || fail "with a spent budget no archive was left"

echo "gpu-check.sh ran end to end on the emulator: $sections sections, $shapes demo shapes; a spent budget stops it"
