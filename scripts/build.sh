#!/usr/bin/env bash
# Configures and builds fusejit with a CMake preset (default: "default",
# into build/). Usage: scripts/build.sh [PRESET [TARGET...]]: every target
# unless some are named (scripts/demo.sh builds only the fusejit command,
# about half the work of the whole tree with its tests).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
shift || true
bash scripts/setup.sh
cmake --preset "$preset" >/dev/null
if (($# > 0)); then
  cmake --build --preset "$preset" -j "${FUSEJIT_JOBS:-2}" --target "$@"
else
  cmake --build --preset "$preset" -j "${FUSEJIT_JOBS:-2}"
fi
