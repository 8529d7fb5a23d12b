#!/usr/bin/env bash
# The main job: sets up, builds, and runs `fusejit demo`, which benchmarks
# the bias -> GeLU -> dropout -> LayerNorm chain unfused against fused, on
# the GPU when there is one and on the CPU otherwise. Extra arguments go to
# `fusejit demo` (e.g. --backend cpu --rows 8192 --plot roofline.svg).
set -euo pipefail
# Run from the caller's directory, so that a relative --plot path is where
# the caller means it.
root="$(cd "$(dirname "$0")/.." && pwd)"
(cd "$root" && bash scripts/build.sh default fusejit_cli)
"$root/build/fusejit" demo "$@"
