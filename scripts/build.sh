#!/usr/bin/env bash
# Configures and builds srutrain into build/ (or $BUILD_DIR) with the standard commands:
#   cmake -S . -B build -G Ninja && cmake --build build
# Extra arguments go to the configure step, e.g. scripts/build.sh -DSRU_CUDA=OFF; SRU_TARGETS="a b"
# builds only those targets (scripts/quickstart.sh: srutrain srueval).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja "$@"
targets=()
for t in ${SRU_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" "${targets[@]}"
