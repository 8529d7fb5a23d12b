#!/usr/bin/env bash
# Fuzzes the .fj parser, the verifier and the stages after parsing that need
# no data (plans, cost report, CPU and CUDA sources) with libFuzzer, ASan and
# UBSan: tests/fuzz/parser_fuzzer.cpp.
#
#   scripts/fuzz-parser.sh [SECONDS]     (default 600)
#
# Builds the `fuzz` preset into build-fuzz/ (clang++; FUSEJIT_JOBS parallel
# jobs, default 2), seeds build-fuzz/fuzz-seeds/ from examples/graphs,
# bench/graphs and tests/fuzz/regressions, keeps what the fuzzer learns in
# build-fuzz/fuzz-corpus/ from run to run, and writes an input that breaks a
# property to build-fuzz/artifacts/ (replay it with
# `build-fuzz/fusejit_parser_fuzzer FILE`, or with
# `build/tests/fuzz/fusejit_parser_replay FILE` in the normal build).
# Exits non-zero when the fuzzer found something.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz-parser.sh [SECONDS]  (a positive number of seconds, default 600)" >&2
  exit 2
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz-parser: clang++ not found; libFuzzer comes with clang. On Debian: apt-get install clang" >&2
  exit 2
fi

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "${FUSEJIT_JOBS:-2}"

out=build-fuzz
seeds=$out/fuzz-seeds
corpus=$out/fuzz-corpus
artifacts=$out/artifacts
dict=$out/fuzz-parser.dict
log=$out/fuzz-parser.log
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus" "$artifacts"
cp examples/graphs/*.fj bench/graphs/*.fj "$seeds"/
cp tests/fuzz/regressions/* "$seeds"/

# The dictionary: the format's words, taken from where they are defined so
# that a new op, dtype or attribute reaches the fuzzer without an edit here.
words() {
  # Op names: the op table (src/ir/ops.def), the single source of truth.
  sed -n 's/^FUSEJIT_[A-Z]*([A-Za-z0-9]*, *"\([a-z0-9_]*\)".*/\1/p' src/ir/ops.def
  # Dtype names (src/ir/dtype.cpp, dtype_name()).
  sed -n 's/.*case DType::k[A-Z0-9]*: return "\([a-z0-9]*\)";.*/\1/p' src/ir/dtype.cpp
  # Attribute names, enum choices and default values (src/ir/op_table.cpp AttrSpec rows).
  grep -o '{"[a-z_]*", AttrType::k[A-Za-z]*, "[^"]*"\(, "[^"]*"\)\?' src/ir/op_table.cpp |
    sed 's/{"\([a-z_]*\)", AttrType::k[A-Za-z]*, "\([^"]*\)"\(, "\([^"]*\)"\)\?/\1=\n\1\n\2\n\4/' | tr '|' '\n'
  # Keywords (src/ir/text_parser.cpp, is_keyword()).
  grep -o 'word == "[a-z]*"' src/ir/text_parser.cpp | sed 's/word == "\(.*\)"/\1/'
}
ops=$(sed -n 's/^FUSEJIT_[A-Z]*([A-Za-z0-9]*, *"\([a-z0-9_]*\)".*/\1/p' src/ir/ops.def | wc -l)
if [[ $ops -lt 10 ]]; then
  echo "fuzz-parser: found only $ops op names in src/ir/ops.def; has the row format changed?" >&2
  exit 2
fi
{
  words | grep -v '^$' | sort -u | awk '{ printf "w%d=\"%s\"\n", NR, $0 }'
  # Punctuation, numbers at the edges of what the parser accepts, and the
  # bytes it must reject (libFuzzer reads \xNN escapes, not \n).
  n=0
  for token in '=' '(' ')' '[' ']' ',' ':' '#' ': ' ' = ' ', ' '\x0a' '\x0d\x0a' '\x09' '\x00' '\xff' '\xc3\xa9' \
               '0' '1' '-1' '.5' '1e-5' '1e308' '1e999' '4.9e-324' '-0' '4096' '2147483648' \
               '4294967296' '9223372036854775807' '9223372036854775808' 'inf' 'nan'; do
    n=$((n + 1))
    printf 'p%d="%s"\n' "$n" "$token"
  done
} >"$dict"
echo "fuzz-parser: $(grep -c . "$dict") dictionary entries ($ops ops) in $dict"

before=$(find "$artifacts" -type f | wc -l)
echo "fuzz-parser: fuzzing for $seconds s; log in $log"
set +e
"$out/fusejit_parser_fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 -print_final_stats=1 \
  -dict="$dict" -artifact_prefix="$artifacts/" "$corpus" "$seeds" 2>&1 | tee "$log" |
  grep -E '^#[0-9]+.*(INITED|DONE)|^==[0-9]+==|^SUMMARY|^parser_fuzzer:|^Done|^stat::|artifact'
status=${PIPESTATUS[0]}
set -e
after=$(find "$artifacts" -type f | wc -l)

echo
echo "fuzz-parser: $(date -u +%Y-%m-%d) $(clang++ --version | head -1)"
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
# libFuzzer's own figures: coverage and the corpus it kept (inputs/bytes).
done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
cov=$(sed -n 's/.* cov: \([0-9]*\) .*/\1/p' <<<"$done_line")
kept=$(sed -n 's/.* corp: \([^ ]*\) .*/\1/p' <<<"$done_line")
echo "fuzz-parser: ${execs:-?} executions in ${took:-?} s (${rate:-?} exec/s); coverage ${cov:-?} edges;" \
  "corpus ${kept:-?} (inputs/bytes) in use, $(find "$corpus" -type f | wc -l) files in $corpus"
if [[ $status -ne 0 || $after -ne $before ]]; then
  echo "fuzz-parser: FOUND SOMETHING (fuzzer exit $status); see $log and $artifacts/" >&2
  exit 1
fi
echo "fuzz-parser: nothing found"
