#!/usr/bin/env bash
# Builds srutrain with the CUDA backend on a machine with an NVIDIA GPU and runs the `cuda` tests
# (CPU-vs-CUDA parity of every op, the fused SRU kernels, the cuDNN LSTM, the optimisers, device
# tensors and the allocator, the hardening tests; a tiny training run on the GPU against the CPU)
# three ways: as they are; with SRU_DEBUG_NAN_FILL=1 (every device block handed out starts as NaN, so
# an output left partly unwritten cannot pass by luck); and under compute-sanitizer — memcheck and
# initcheck over the CUDA test binary, racecheck over the SRU and the shared-memory kernels — with
# SRU_CUDA_NO_CACHING=1 so that every tensor is its own allocation the sanitizer can see. With two GPUs
# or more, data-parallel training over NCCL (tests/e2e/mpi.sh on the GPUs). Then the GPU benchmarks.
# For machines without a package registry, carry the build's Debian packages in .devdeps/ beside the
# checkout (made on a machine with one by a packer such as ../shared/tools/device-deps.sh); this script
# sources .devdeps/env.sh when it exists. Output: the device line, the test logs (in $LOG_DIR, default
# build-gpu/logs), and a one-line verdict per stage. Usage: scripts/gpu_check.sh [ctest args...]
# SKIP_SANITIZER=1 skips the compute-sanitizer stage (then the verdict says so).
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
# Stage 1: the cuda tests as they are. Stage 2: the same with NaN-filled device blocks.
run_ctest() {  # NAME [VAR=VALUE...]: ctest -L cuda with those variables set, log in $log_dir/NAME.log
  local name=$1 status=0
  shift
  (cd "$build_dir" && env "$@" ctest -L cuda --output-on-failure "${ctest_args[@]}") > "$log_dir/$name.log" 2>&1 || status=$?
  tail -25 "$log_dir/$name.log"
  if [ $status -ne 0 ]; then
    echo "gpu_check: FAILED: cuda tests ($name; log: $log_dir/$name.log)"
    exit $status
  fi
  echo "gpu_check: OK: cuda tests ($name)"
}
ctest_args=("$@")
run_ctest ctest
run_ctest ctest-nanfill SRU_DEBUG_NAN_FILL=1

# Stage 3: compute-sanitizer. memcheck and initcheck over the CUDA test binary (without the tests
# that move gigabytes, which would take hours under the sanitizer); racecheck (shared-memory hazards)
# over the SRU kernels, and over the kernels that do use shared memory: the fixed-tree block
# reductions of softmax, cross-entropy, layer norm, row sums and the gradient-norm blocks.
sanitizer_status="not run"
sanitizer=$(command -v compute-sanitizer || true)
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [ "${SKIP_SANITIZER:-0}" = 1 ]; then
  sanitizer_status="skipped (SKIP_SANITIZER=1)"
elif [ -z "$sanitizer" ]; then
  sanitizer_status="NOT RUN: compute-sanitizer not found (install the CUDA Toolkit's compute-sanitizer)"
else
  # shellcheck source=scripts/gpu_sanitizer_filters.sh
  source scripts/gpu_sanitizer_filters.sh
  sanitize() {  # TOOL FILTER
    local log="$log_dir/sanitizer-$1.log"
    if SRU_CUDA_NO_CACHING=1 "$sanitizer" --tool "$1" --error-exitcode 1 "$build_dir"/tests/test_cuda \
        --gtest_filter="$2" > "$log" 2>&1; then
      echo "gpu_check: OK: compute-sanitizer $1"
    else
      grep -E "=========|FAILED" "$log" | head -30
      echo "gpu_check: FAILED: compute-sanitizer $1 (log: $log)"
      return 1
    fi
  }
  sanitizer_status=OK
  sanitize memcheck "$sanitizer_memcheck_filter" || sanitizer_status=FAILED
  sanitize initcheck "$sanitizer_initcheck_filter" || sanitizer_status=FAILED
  sanitize racecheck "$sanitizer_racecheck_filter" || sanitizer_status=FAILED
fi
echo "gpu_check: compute-sanitizer: $sanitizer_status"

# Stage 4: data parallel over NCCL, one process per GPU, when there are two GPUs or more (never run
# yet): 2 ranks against 1 process (losses within 1e-4: cuBLAS sums a rank's half batch in its own
# order), resume across 2 -> 1 -> 2 ranks, Ctrl-C on one rank, and a stopped rank named by the timeout.
gpus=$(nvidia-smi -L 2> /dev/null | grep -c "^GPU" || true)
nccl_status="not run: ${gpus:-0} GPU(s), data parallel on GPUs needs 2 or more"
if [ "${gpus:-0}" -ge 2 ]; then
  mpirun=$(command -v mpirun || true)
  if [ -z "$mpirun" ] || ! grep -q "NCCL: " "$log_dir/configure.log"; then
    nccl_status="NOT RUN: needs mpirun (openmpi-bin) and NCCL found at configure time"
  else
    nccl_status=OK
    for case in equal resume interrupt hang; do
      if SRU_MPI_TEST_DEVICE=cuda SRU_MPI_TEST_TOL=1e-4 bash tests/e2e/mpi.sh "$build_dir" . "$mpirun" $case \
          > "$log_dir/nccl-$case.log" 2>&1; then
        echo "gpu_check: OK: data parallel on GPUs ($case)"
      else
        tail -15 "$log_dir/nccl-$case.log"; echo "gpu_check: FAILED: data parallel on GPUs ($case; log: $log_dir/nccl-$case.log)"
        nccl_status=FAILED
      fi
    done
  fi
fi
echo "gpu_check: NCCL data parallel: $nccl_status"

# Benchmarks (tables printed; JSON rows in $log_dir): one layer, SRU vs cuDNN LSTM with the recurrence's
# and a copy's bandwidth; then training steps of the enwik8-small SRU and LSTM configs on the GPU.
"$build_dir"/srubench --warm-up-seconds 0 sru-vs-lstm --device cuda --lengths 32 128 256 --hidden 256 512 1024 \
  --batch 32 --repeats 20 --json "$log_dir/sru_vs_lstm_cuda.json" | tee "$log_dir/sru_vs_lstm_cuda.txt"
if [ -f data/enwik8-sample/enwik8.head1M ]; then
  "$build_dir"/srubench --warm-up-seconds 0 train-epoch --config configs/enwik8-small.yaml \
    --config configs/enwik8-small-lstm.yaml --set train.device=cuda --set data.path=data/enwik8-sample/enwik8.head1M \
    --steps 50 --repeats 3 --json "$log_dir/train_epoch_cuda.json" | tee "$log_dir/train_epoch_cuda.txt"
fi
if [ "$nccl_status" = FAILED ]; then
  echo "gpu_check: FAILED: data parallel on GPUs"
  exit 1
fi
if [ "$sanitizer_status" != OK ]; then
  echo "gpu_check: INCOMPLETE: compute-sanitizer $sanitizer_status"
  exit 1
fi
echo "gpu_check: OK: all stages passed"
