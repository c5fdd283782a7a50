#!/usr/bin/env bash
# Everything a short GPU lease must do, in few calls, for machines that reach no package registry and
# are lent by the minute (the `device` tool; docs/gpu-notes.md tells how the first session used it):
#   here:  scripts/gpu_lease.sh pack     builds build-gpu/ with CUDA (sm_90, no MPI) and packs into
#          .gpucarry/ the stripped test and program binaries with the CTest files (xz), and the
#          reference `sru` v2.6 package from SRU_REF_REPO (a git directory), patched to build against
#          PyTorch 2.11; BEFORE_SRUBENCH=PATH adds an older srubench to time beside this one. Carry
#          .gpucarry with .devdeps (../shared/tools/device-deps.sh).
#   there: scripts/gpu_lease.sh run      against deadlines (LEASE_TESTS_END, LEASE_BENCH_END seconds):
#          the device line; the `cuda` tests plainly and with NaN-filled blocks while compute-sanitizer
#          memcheck, initcheck and racecheck run beside them (scripts/gpu_check.sh's filters, with
#          SRU_CUDA_NO_CACHING=1); then on a quiet card srubench sru-vs-lstm and train-epoch, the
#          PyTorch peers (scripts/gpu_peer_bench.py: torch.nn.LSTM, the reference SRU), the same again
#          at matmul precision high (TF32, both sides), every kernel of a paper-size training step
#          under Nsight Compute at both precisions (scripts/ncu_kernel_table.py), and Nsight Compute on
#          the recurrence. LEASE_QUICK=1: the tests once, memcheck, racecheck and our benchmarks only.
#   there: scripts/gpu_lease.sh profile  the recurrence's per-instruction stall samples (CSV) alone.
# Logs and JSON rows come back in $OUT/lease-logs.tar.gz ($OUT: the device tool's folder; default
# /tmp/gpu-lease), the verdicts in $OUT/verdicts.txt and last in the output. scripts/gpu_check.sh stays
# the one-command check (it builds there) for a GPU machine with a package registry.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
carry=.gpucarry
build="build-gpu"

if [ "$mode" = pack ]; then
  set -e
  if [ ! -x $build/tests/test_cuda ]; then
    cmake -S . -B $build -G Ninja -DSRU_CUDA=ON -DSRU_MPI=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
  fi
  cmake --build $build -j "$(nproc)"
  rm -rf $carry && mkdir -p $carry
  # The CTest files (they hold this machine's absolute paths, which `run` makes valid there with a link)
  # and the programs the `cuda` tests and the benchmarks run, stripped.
  mkdir -p $carry/$build
  (cd $build && find . -type f \( -name 'CTestTestfile.cmake' -o -name '*_tests.cmake' -o -name '*_include.cmake' \) \
     ! -path '*/CMakeFiles/*' -print0 | tar --null -T - -cf -) | tar -xf - -C $carry/$build
  for program in tests/test_cuda srutrain srueval srubench; do
    strip -o $carry/$build/$program $build/$program
  done
  # BEFORE_SRUBENCH: an earlier srubench, timed beside this one in the same call (a change's before/after).
  [ -n "${BEFORE_SRUBENCH:-}" ] && strip -o $carry/$build/srubench-before "$BEFORE_SRUBENCH"
  tar -C $carry -cJf $carry/$build.tar.xz $build && rm -rf "${carry:?}/$build"  # a third of the bytes to send
  pwd > $carry/source_dir
  if [ -n "${SRU_REF_REPO:-}" ]; then
    mkdir -p $carry/sru_ref
    git --git-dir="$SRU_REF_REPO" archive HEAD sru | tar -x -C $carry/sru_ref
    git --git-dir="$SRU_REF_REPO" log -1 --format='reference sru: %H %cd' > $carry/sru_ref/VERSION
    # PyTorch 2.11 dropped the conversion of Tensor::type() to a scalar type that its kernel's dispatch
    # macros use: the same calls through scalar_type() / is_cuda(), nothing else changed.
    sed -i 's/AT_DISPATCH_FLOATING_TYPES_AND_HALF(U\.type()/AT_DISPATCH_FLOATING_TYPES_AND_HALF(U.scalar_type()/' \
      $carry/sru_ref/sru/csrc/sru_cuda_kernel.cu
    sed -i 's/x\.type()\.is_cuda()/x.is_cuda()/' $carry/sru_ref/sru/csrc/sru_cuda_impl.cpp
    echo "patched for PyTorch 2.11: U.type() -> U.scalar_type() in the dispatch macros, x.type().is_cuda() -> x.is_cuda()" \
      >> $carry/sru_ref/VERSION
  fi
  du -sh $carry .devdeps 2> /dev/null
  exit 0
fi
[ "$mode" = run ] || [ "$mode" = profile ] || { echo "usage: scripts/gpu_lease.sh pack|run|profile"; exit 2; }

# The device tool brings back at most 8 files from $OUT: logs are written to a work folder and packed
# into $OUT/lease-logs.tar.gz after every stage (and on exit), with verdicts.txt beside it.
final_out=${OUT:-/tmp/gpu-lease}
out=/tmp/gpu-lease-logs
mkdir -p "$out" "$final_out"
pack_logs() { tar -C "$out" -czf "$final_out/lease-logs.tar.gz" . 2> /dev/null; }
trap pack_logs EXIT
trap 'exit 124' TERM
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
say() { echo "[$(elapsed)s] $*"; }
# Stage deadlines, in seconds from the start (the call's limit must exceed LEASE_BENCH_END).
tests_end=${LEASE_TESTS_END:-210}
bench_end=${LEASE_BENCH_END:-380}

# shellcheck disable=SC1091
source .devdeps/env.sh > /dev/null
rm -rf $build && tar -xJf $carry/$build.tar.xz
built_at=$(cat $carry/source_dir)
if [ "$(realpath -m "$built_at")" != "$(realpath "$PWD")" ]; then
  [ -e "$built_at" ] && { echo "gpu_lease: $built_at (where the build was made) exists and is not this checkout"; exit 1; }
  mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"
fi
# cuDNN and, where the toolkit lacks them, cuBLAS from PyTorch's wheels.
pylib=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2> /dev/null || true)
for lib in /usr/local/cuda/lib64 "$pylib"/cudnn/lib "$pylib"/cu13/lib "$pylib"/cublas/lib; do
  [ -d "$lib" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$lib
done
export PATH=/usr/local/cuda/bin:$PATH
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -1
  compute-sanitizer --version 2>&1 | head -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuDNN", torch.backends.cudnn.version())'
  ldd $build/tests/test_cuda | grep -E "not found|cudnn|cublas|cudart"
  cat $carry/sru_ref/VERSION 2> /dev/null
} 2>&1 | tee "$out/device.txt"
verdicts=()
# One forward + backward of the recurrence after one untimed, for the profiler.
one_run=("$build/srubench" --warm-up-seconds 0 sru-vs-lstm --device cuda --lengths 256 --hidden 1024 --batch 32
         --impls recurrence --warmup 1 --repeats 1)

# `profile`: only the recurrence under Nsight Compute with per-instruction stall samples (the SASS
# source page as CSV, for reading here), for a lease too short for `run`.
if [ "$mode" = profile ]; then
  ncu --clock-control none -k 'regex:(forward|backward)_kernel' --launch-skip 2 --launch-count 2 \
    --section WarpStateStats --section SourceCounters --section SchedulerStats --section InstructionStats \
    -o "$out/recurrence" "${one_run[@]}" > "$out/ncu_profile.txt" 2>&1
  verdicts+=("ncu profile: rc $?")
  ncu --import "$out/recurrence.ncu-rep" --print-details all > "$out/ncu_details.txt" 2>&1
  ncu --import "$out/recurrence.ncu-rep" --page source --csv --print-source sass > "$out/recurrence_sass.csv" 2>&1
  verdicts+=("ncu sass page: rc $? ($(wc -l < "$out/recurrence_sass.csv") lines)")
  grep -E "stall|Stall|L1TEX|Long Scoreboard" "$out/ncu_details.txt" | head -40
  printf '%s\n' "${verdicts[@]}" | tee "$out/verdicts.txt" "$final_out/verdicts.txt"
  exit 0
fi

# The reference SRU's CUDA kernel builds (CPU work) while the tests run.
export TORCH_EXTENSIONS_DIR=/tmp/torch_ext TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=8
# LEASE_QUICK=1 (a last short lease): the tests once (no NaN-fill rerun), memcheck and racecheck, our
# benchmarks and the profile's kernel times; no peers, no initcheck.
quick=${LEASE_QUICK:-0}
ref_pid=
if [ "$quick" != 1 ]; then
  ( cd $carry/sru_ref && timeout 300 python3 -c 'import sru' ) > "$out/sru_ref_build.log" 2>&1 &
  ref_pid=$!
fi

# compute-sanitizer beside the tests: over test_cuda without the multi-gigabyte tests, racecheck over
# the SRU and the shared-memory kernels (scripts/gpu_sanitizer_filters.sh, shared with gpu_check.sh).
# shellcheck source=scripts/gpu_sanitizer_filters.sh
source scripts/gpu_sanitizer_filters.sh
sanitize() {  # TOOL FILTER
  SRU_CUDA_NO_CACHING=1 timeout $(( tests_end - $(elapsed) )) compute-sanitizer --tool "$1" --error-exitcode 1 \
    $build/tests/test_cuda --gtest_filter="$2" > "$out/sanitizer-$1.log" 2>&1
  echo $? > "$out/sanitizer-$1.rc"
}
sanitize memcheck "$sanitizer_memcheck_filter" &
sanitize racecheck "$sanitizer_racecheck_filter" &
[ "$quick" != 1 ] && sanitize initcheck "$sanitizer_memcheck_filter" &

run_ctest() {  # NAME [VAR=VALUE...]
  local name=$1 status=0 left=$(( tests_end - $(elapsed) ))
  shift
  if [ "$left" -le 0 ]; then verdicts+=("cuda tests ($name): skipped (past the deadline)"); return; fi
  (cd $build && env "$@" timeout "$left" ctest -L cuda -j 6 --timeout 150 --output-on-failure) \
    > "$out/$name.log" 2>&1 || status=$?
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Exception|\*\*\*" "$out/$name.log" | head -20
  verdicts+=("cuda tests ($name): $([ $status = 0 ] && echo OK || echo "FAILED ($status)")")
}
say "cuda tests"
run_ctest ctest
[ "$quick" != 1 ] && run_ctest ctest-nanfill SRU_DEBUG_NAN_FILL=1
[ -n "$ref_pid" ] && wait $ref_pid
say "waiting for compute-sanitizer (deadline ${tests_end}s)"
while jobs -r | grep -q sanitize && [ "$(elapsed)" -lt "$tests_end" ]; do sleep 2; done
for tool in memcheck racecheck $([ "$quick" != 1 ] && echo initcheck); do
  rc=$(cat "$out/sanitizer-$tool.rc" 2> /dev/null || echo running)
  summary=$(grep -E "ERROR SUMMARY|tests? (passed|ran)" "$out/sanitizer-$tool.log" | tail -2 | tr '\n' ' ')
  verdicts+=("compute-sanitizer $tool: rc $rc ($([ "$rc" = 124 ] && echo 'stopped at its deadline, ')$summary)")
done
jobs -p | xargs -r kill 2> /dev/null
wait 2> /dev/null

# Benchmarks on a quiet card: ours, then the peers, the same shapes.
pack_logs
say "benchmarks (deadline ${bench_end}s)"
bench() {  # NAME COMMAND...
  local name=$1 left=$(( bench_end - $(elapsed) ))
  shift
  # timeout 0 would mean no limit at all
  if [ "$left" -le 0 ]; then verdicts+=("bench $name: skipped (past the deadline)"); return; fi
  timeout "$left" "$@" > "$out/$name.txt" 2>&1
  local status=$?
  grep -v "^\[" "$out/$name.txt" | tail -40
  verdicts+=("bench $name: rc $status")
  pack_logs
}
sizes=(--lengths 32 128 256 --hidden 256 512 1024 --batch 32)
bench sru_vs_lstm $build/srubench --warm-up-seconds 0 sru-vs-lstm --device cuda "${sizes[@]}" --repeats 20 \
  --impls gemm recurrence copy sru_fused lstm_cudnn --json "$out/sru_vs_lstm.json"
if [ -x $build/srubench-before ]; then
  bench sru_vs_lstm_before $build/srubench-before --warm-up-seconds 0 sru-vs-lstm --device cuda "${sizes[@]}" --repeats 20 \
    --impls recurrence copy sru_fused --json "$out/sru_vs_lstm_before.json"
fi
[ "$quick" != 1 ] && bench peer_layer python3 scripts/gpu_peer_bench.py --sru-src $carry/sru_ref --json "$out/peer_layer.json" layer "${sizes[@]}"
data=data/enwik8-sample/enwik8.head1M
configs=(configs/enwik8-small.yaml configs/enwik8-small-lstm.yaml configs/enwik8.yaml configs/enwik8-lstm.yaml)
[ "$quick" != 1 ] && bench train_epoch $build/srubench --warm-up-seconds 0 train-epoch "${configs[@]/#/--config=}" --set train.device=cuda \
  --set data.path=$data --steps 20 --warmup-steps 3 --repeats 3 --json "$out/train_epoch.json"
[ "$quick" != 1 ] && bench peer_train python3 scripts/gpu_peer_bench.py --sru-src $carry/sru_ref --repeats 3 --json "$out/peer_train.json" \
  train --config "${configs[@]}" --data $data --steps 20
# The same at matmul precision high (TF32 tensor cores), ours and the peers alike: the paper-size
# configs, whose steps are mostly GEMMs, and the layer at the issue's sizes.
paper=(configs/enwik8.yaml configs/enwik8-lstm.yaml)
[ "$quick" != 1 ] && bench train_epoch_tf32 $build/srubench --warm-up-seconds 0 train-epoch "${paper[@]/#/--config=}" \
  --set train.device=cuda --set train.matmul_precision=high --set data.path=$data --steps 20 --warmup-steps 3 --repeats 3 \
  --json "$out/train_epoch_tf32.json"
[ "$quick" != 1 ] && bench peer_train_tf32 python3 scripts/gpu_peer_bench.py --matmul-precision high --sru-src $carry/sru_ref \
  --repeats 3 --json "$out/peer_train_tf32.json" train --config "${paper[@]}" --data $data --steps 20
[ "$quick" != 1 ] && bench sru_vs_lstm_tf32 $build/srubench --warm-up-seconds 0 sru-vs-lstm --device cuda --matmul-precision high \
  "${sizes[@]}" --repeats 20 --impls gemm sru_fused lstm_cudnn --json "$out/sru_vs_lstm_tf32.json"
[ "$quick" != 1 ] && bench peer_layer_tf32 python3 scripts/gpu_peer_bench.py --matmul-precision high --sru-src $carry/sru_ref \
  --json "$out/peer_layer_tf32.json" layer "${sizes[@]}"
# Where a paper-size step's time goes, at both precisions: every kernel of 3 steps (1 warm-up + 2) under
# Nsight Compute, grouped by name (scripts/ncu_kernel_table.py), against the step time measured above.
profile_step() {  # PRECISION TIMED_JSON
  local csv="$out/ncu_train_$1.csv" step_ms
  bench "ncu_train_$1" ncu --clock-control none --csv --print-units base --print-kernel-base function --log-file "$csv" \
    --metrics gpu__time_duration.sum,dram__bytes.sum $build/srubench --warm-up-seconds 0 train-epoch \
    --config=configs/enwik8.yaml --set train.device=cuda --set train.matmul_precision="$1" --set data.path=$data \
    --steps 2 --warmup-steps 1 --repeats 1
  step_ms=$(python3 -c 'import json, sys; r = [r for r in json.load(open(sys.argv[1]))["rows"] if r["impl"] == "enwik8"][0]
print(r["s_per_epoch"] / r["steps_per_epoch"] * 1000)' "$2" 2> /dev/null || echo 0)
  [ -s "$csv" ] && bench "ncu_train_$1_table" python3 scripts/ncu_kernel_table.py "$csv" --steps 3 --step-ms "$step_ms"
}
if command -v ncu > /dev/null && [ "$quick" != 1 ]; then
  profile_step high "$out/train_epoch_tf32.json"
  profile_step highest "$out/train_epoch.json"
fi
# The recurrence under Nsight Compute at L 256, d 1024, B 32: every kernel's time in one forward +
# backward, then the SRU kernels' sections (clocks left as they are).
if command -v ncu > /dev/null; then
  bench ncu_kernels ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum "${one_run[@]}"
  [ "$quick" != 1 ] && bench ncu_recurrence ncu --clock-control none -k 'regex:(forward|backward)_kernel' --launch-skip 2 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section LaunchStats "${one_run[@]}"
fi
say "done"
printf '%s\n' "${verdicts[@]}" | tee "$out/verdicts.txt" "$final_out/verdicts.txt"
