#!/usr/bin/env bash
# Builds the CPU code with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ and runs
# the cpu tests there, except the nanfill.* repeats (the same tests in NaN-fill mode, already run by
# scripts/test.sh; under ASan they would double the time for no new code path). Arguments are passed to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=build-asan scripts/build.sh -DSRU_SANITIZE=ON -DSRU_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
# detect_leaks=0: the OpenMP and OpenBLAS runtimes keep their thread pools' memory until exit.
cd build-asan
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "$(nproc)" -L cpu -E '^nanfill\.' "$@"
