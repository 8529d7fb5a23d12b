#!/usr/bin/env bash
# The main job: sets up, builds, and runs the bias -> GeLU -> dropout ->
# LayerNorm example graph. Extra arguments go to `fusejit run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh default
./build/fusejit run examples/graphs/bias_gelu_dropout_layernorm.fj "$@"
