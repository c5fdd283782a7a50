#!/usr/bin/env bash
# Builds srutrain with the CUDA backend on a machine with an NVIDIA GPU and runs the `cuda` tests
# (CPU-vs-CUDA parity of every op and of the fused SRU kernels, device tensors, the allocator).
# For machines without a package registry, carry the build's Debian packages in .devdeps/ beside the
# checkout (made on a machine with one by a packer such as ../shared/tools/device-deps.sh); this script
# sources .devdeps/env.sh when it exists. Output: the device line, the test log (also in $LOG_DIR,
# default build-gpu/logs), and a one-line verdict. Usage: scripts/gpu_check.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .devdeps/env.sh ]; then
  # shellcheck disable=SC1091
  source .devdeps/env.sh
fi
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc > /dev/null || { echo "gpu_check: nvcc not found (install the CUDA Toolkit or put it in PATH)"; exit 1; }
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
build_dir=${BUILD_DIR:-build-gpu}
log_dir=${LOG_DIR:-$build_dir/logs}
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S . -B "$build_dir" "${generator[@]}" -DSRU_CUDA=ON -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build_dir" -j "$(nproc)" 2>&1 | tail -3
mkdir -p "$log_dir"
# The tests skip rather than fail without a device: make that an error here.
"$build_dir"/tests/test_cuda --gtest_filter='CudaDevice.*' 2>&1 | tee "$log_dir/device.log" | grep -E "cuda:|runtime|SKIPPED" || true
if grep -q "SKIPPED" "$log_dir/device.log"; then
  echo "gpu_check: FAILED: no usable CUDA device (see $log_dir/device.log)"
  exit 1
fi
status=0
(cd "$build_dir" && ctest -L cuda --output-on-failure "$@") > "$log_dir/ctest.log" 2>&1 || status=$?
tail -25 "$log_dir/ctest.log"
if [ $status -ne 0 ]; then
  echo "gpu_check: FAILED: cuda tests (log: $log_dir/ctest.log)"
  exit $status
fi
echo "gpu_check: OK: all cuda tests passed"
