#!/usr/bin/env bash
# Sets up, builds and runs every test. Usage: scripts/test.sh [PRESET]
# (PRESET "asan" builds with AddressSanitizer + UBSan into build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
bash scripts/build.sh "$preset"
ctest --preset "$preset" -j "${FUSEJIT_JOBS:-2}"
