#!/usr/bin/env bash
# Configures and builds fusejit with a CMake preset (default: "default",
# into build/). Usage: scripts/build.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
bash scripts/setup.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "${FUSEJIT_JOBS:-2}"
