#!/usr/bin/env bash
# Installs what the build needs, builds, and runs the test suite with CTest.
# CUDA tests are labelled `cuda` and report SKIPPED on machines without a GPU.
# Arguments are passed to ctest (e.g. -L cpu, -R Gradcheck).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)" "$@")
