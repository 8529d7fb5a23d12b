#!/usr/bin/env bash
# Installs what fusejit needs to build and test on Debian 12, if missing.
# Safe to run again: it installs nothing when everything is present.
# The CUDA toolkit is optional (NVRTC tests and the GPU backend need it); it
# is not a Debian package here and is looked for under /usr/local/cuda.
set -euo pipefail

# gnuplot-nox draws `fusejit bench --plot` charts; g++ is also the CPU backend's JIT compiler.
packages=(cmake ninja-build g++ libabsl-dev libfmt-dev libgtest-dev libcli11-dev nlohmann-json3-dev gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: not root; run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [[ ! -x /usr/local/cuda/bin/nvcc && -z "${CUDA_HOME:-}${CUDA_PATH:-}" ]]; then
  echo "setup: no CUDA toolkit found; fusejit builds without the GPU backend"
fi
