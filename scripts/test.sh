#!/usr/bin/env bash
# Installs what the build needs, builds, and runs the test suite with CTest.
# CUDA tests are labelled `cuda` and report SKIPPED on machines without a GPU.
# Arguments are passed to ctest (e.g. -L cpu, -R Gradcheck).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
# ctest runs a test per core; OpenMP threads that spin while they wait (libgomp's and libomp's default)
# then burn the time slices that the neighbouring test's threads need: a gradient check beside the SQuAD
# training test took 45 s instead of 0.5 s, the whole suite 391 s instead of 238 s (2 cores). The
# trainers' own thread governor (core/parallel.h) is off in unit tests, which never set a thread count.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
(cd build && ctest --output-on-failure -j "$(nproc)" "$@")
