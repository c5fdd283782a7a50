#!/usr/bin/env bash
# Builds srutrain with the CUDA backend on a machine with an NVIDIA GPU and runs the `cuda` tests
# (CPU-vs-CUDA parity of every op, the fused SRU kernels, the cuDNN LSTM, the optimisers, device
# tensors and the allocator; a tiny training run on the GPU against the CPU), then the GPU benchmarks.
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
# cuDNN: the toolkit's, else the one a Python wheel (nvidia-cudnn-cu13, as PyTorch images have) ships.
if [ -z "${CUDNN_ROOT:-}" ] && [ ! -f /usr/local/cuda/include/cudnn.h ] && command -v python3 > /dev/null; then
  CUDNN_ROOT=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2> /dev/null \
    || python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2> /dev/null || true)
  [ -n "$CUDNN_ROOT" ] && export CUDNN_ROOT && echo "gpu_check: cuDNN from $CUDNN_ROOT"
fi
[ -n "${CUDNN_ROOT:-}" ] && export LD_LIBRARY_PATH=$CUDNN_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
build_dir=${BUILD_DIR:-build-gpu}
log_dir=${LOG_DIR:-$build_dir/logs}
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
mkdir -p "$log_dir"
if ! cmake -S . -B "$build_dir" "${generator[@]}" -DSRU_CUDA=ON -DCMAKE_BUILD_TYPE=Release > "$log_dir/configure.log" 2>&1; then
  tail -30 "$log_dir/configure.log"; echo "gpu_check: FAILED: configure (log: $log_dir/configure.log)"; exit 1
fi
grep "CUDA:" "$log_dir/configure.log" || true
if ! cmake --build "$build_dir" -j "$(nproc)" > "$log_dir/build.log" 2>&1; then
  grep -E "error|FAILED" "$log_dir/build.log" | head -30; echo "gpu_check: FAILED: build (log: $log_dir/build.log)"; exit 1
fi
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
# Benchmarks (tables printed; JSON rows in $log_dir): one layer, SRU vs cuDNN LSTM with the recurrence's
# and a copy's bandwidth; then training steps of the enwik8-small SRU and LSTM configs on the GPU.
"$build_dir"/srubench --warm-up-seconds 0 sru-vs-lstm --device cuda --lengths 32 128 256 --hidden 256 512 1024 \
  --batch 32 --repeats 20 --json "$log_dir/sru_vs_lstm_cuda.json" | tee "$log_dir/sru_vs_lstm_cuda.txt"
if [ -f data/enwik8-sample/enwik8.head1M ]; then
  "$build_dir"/srubench --warm-up-seconds 0 train-epoch --config configs/enwik8-small.yaml \
    --config configs/enwik8-small-lstm.yaml --set train.device=cuda --set data.path=data/enwik8-sample/enwik8.head1M \
    --steps 50 --repeats 3 --json "$log_dir/train_epoch_cuda.json" | tee "$log_dir/train_epoch_cuda.txt"
fi
