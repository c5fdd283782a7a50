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
#          SRU_CUDA_NO_CACHING=1), and tests/tools/cuda_library_probe's questions to cuBLAS and cuDNN
#          (the cuDNN LSTM under initcheck with each error placed in a buffer); then on a quiet card the
#          paper-size configs at every precision, ours (srubench train-epoch) beside the PyTorch
#          peers at theirs (scripts/gpu_peer_bench.py: fp32, tf32, AMP fp16, AMP bf16), every kernel of
#          a paper-size training step under Nsight Compute at tf32 and bf16
#          (scripts/ncu_kernel_table.py), srubench sru-vs-lstm and the small configs with their peers,
#          and Nsight Compute on the recurrence. LEASE_QUICK=1: the tests once, memcheck, racecheck and
#          our benchmarks only.
#   there: scripts/gpu_lease.sh focus    the tests, sanitizers and probes as `run` does, then only what
#          the latest change needs timed (edit the focus block below): a short second call of a lease.
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
  cmake --build $build -j "$(nproc)" --target test_cuda cuda_library_probe srutrain srueval srubench
  rm -rf $carry && mkdir -p $carry
  # The CTest files (they hold this machine's absolute paths, which `run` makes valid there with a link)
  # and the programs the `cuda` tests and the benchmarks run, stripped.
  mkdir -p $carry/$build
  (cd $build && find . -type f \( -name 'CTestTestfile.cmake' -o -name '*_tests.cmake' -o -name '*_include.cmake' \) \
     ! -path '*/CMakeFiles/*' -print0 | tar --null -T - -cf -) | tar -xf - -C $carry/$build
  for program in tests/test_cuda tests/cuda_library_probe srutrain srueval srubench; do
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
[ "$mode" = run ] || [ "$mode" = focus ] || [ "$mode" = profile ] || { echo "usage: scripts/gpu_lease.sh pack|run|focus|profile"; exit 2; }

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
if [ "$quick" != 1 ]; then  # run and focus (profile has left above)
  ( cd $carry/sru_ref && timeout 300 python3 -c 'import sru' ) > "$out/sru_ref_build.log" 2>&1 &
  ref_pid=$!
fi

# compute-sanitizer beside the tests: over test_cuda without the multi-gigabyte tests, racecheck over
# the SRU and the shared-memory kernels (scripts/gpu_sanitizer_filters.sh, shared with gpu_check.sh).
# shellcheck source=scripts/gpu_sanitizer_filters.sh
source scripts/gpu_sanitizer_filters.sh
sanitize() {  # TOOL FILTER [SHARDS]
  # SHARDS > 1: that many processes, each a gtest shard of the filter (initcheck over the whole suite took
  # longer than the tests' window in one process on 2026-11-29); the logs joined, the worst rc kept (124,
  # a shard stopped at the deadline, before any other failure).
  local shards=${3:-1} i rc=0 shard_rc pids=()
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i SRU_CUDA_NO_CACHING=1 timeout $(( tests_end - 5 - $(elapsed) )) \
      compute-sanitizer --tool "$1" --error-exitcode 1 --print-limit 3000 $build/tests/test_cuda --gtest_filter="$2" \
      > "$out/sanitizer-$1.$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    shard_rc=$?
    if [ $shard_rc = 124 ] || { [ $shard_rc != 0 ] && [ $rc != 124 ]; }; then rc=$shard_rc; fi
  done
  cat "$out"/sanitizer-"$1".*.log > "$out/sanitizer-$1.log" && rm -f "$out"/sanitizer-"$1".*.log
  echo $rc > "$out/sanitizer-$1.rc"
}
# LEASE_GTEST_FILTER (with focus): only those tests of test_cuda, plainly, NaN-filled and under each
# sanitizer (initcheck without the tensor-core tests), and no probes: a short call for one change.
only=${LEASE_GTEST_FILTER:-}
if [ -n "$only" ]; then
  sanitizer_memcheck_filter=$only
  sanitizer_racecheck_filter=$only
  # gtest takes one '-' before the negative patterns: join ours to any the filter brings with ':'.
  case $only in
    *-*) sanitizer_initcheck_filter="$only:${sanitizer_initcheck_filter#-}" ;;
    *) sanitizer_initcheck_filter="$only-${sanitizer_initcheck_filter#-}" ;;
  esac
fi
sanitize memcheck "$sanitizer_memcheck_filter" &
sanitize racecheck "$sanitizer_racecheck_filter" &
[ "$quick" != 1 ] && sanitize initcheck "$sanitizer_initcheck_filter" 3 &

# What cuBLAS and cuDNN do here (docs/gpu-notes.md "Two defects found on the card"): the float32
# compute types' errors, and one cuDNN LSTM layer under initcheck at each precision with its initial
# states absent (null) and explicit zeros, every error placed in the buffer it read; then absent and
# zero states compared bit for bit over NaN-filled blocks.
probe=$build/tests/cuda_library_probe
probes() {
  timeout 60 $probe gemm > "$out/probe_gemm.txt" 2>&1
  for variant in "tf32 absent" "tf32 zeros" "fp32 absent" "bf16 absent"; do
    local name=probe_lstm_${variant// /_}
    # shellcheck disable=SC2086  # the variant is two words
    SRU_CUDA_NO_CACHING=1 timeout 120 compute-sanitizer --tool initcheck --print-limit 100000 \
      $probe lstm $variant > "$out/$name.txt" 2>&1
    echo "rc $?" >> "$out/$name.txt"
    python3 scripts/initcheck_places.py "$out/$name.txt" "$out/$name.txt" --allow elemWiseRNNcell > "$out/$name.places" 2>&1
    echo $? > "$out/$name.places.rc"
  done
  for precision in tf32 fp32; do
    SRU_DEBUG_NAN_FILL=1 timeout 60 $probe lstm-compare $precision >> "$out/probe_lstm_compare.txt" 2>&1
  done
}
[ "$quick" != 1 ] && [ -z "$only" ] && probes &

run_ctest() {  # NAME [VAR=VALUE...]
  local name=$1 status=0 left=$(( tests_end - $(elapsed) ))
  shift
  if [ "$left" -le 0 ]; then verdicts+=("cuda tests ($name): skipped (past the deadline)"); return; fi
  if [ -n "$only" ]; then
    env "$@" timeout "$left" $build/tests/test_cuda --gtest_filter="$only" > "$out/$name.log" 2>&1 || status=$?
  else
    (cd $build && env "$@" timeout "$left" ctest -L cuda -j 6 --timeout 150 --output-on-failure) \
      > "$out/$name.log" 2>&1 || status=$?
  fi
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Exception|\*\*\*|PASSED|FAILED" "$out/$name.log" | head -20
  verdicts+=("cuda tests ($name): $([ $status = 0 ] && echo OK || echo "FAILED ($status)")")
}
say "cuda tests"
run_ctest ctest
[ "$quick" != 1 ] && run_ctest ctest-nanfill SRU_DEBUG_NAN_FILL=1
[ -n "$ref_pid" ] && wait $ref_pid
say "waiting for compute-sanitizer and the probes (deadline ${tests_end}s)"
while jobs -r | grep -qE "sanitize|probes" && [ "$(elapsed)" -lt "$tests_end" ]; do sleep 2; done
if [ "$quick" != 1 ] && [ -z "$only" ]; then
  { cat "$out/probe_gemm.txt"
    for f in "$out"/probe_lstm_*.places; do
      echo "== $(basename "$f" .places): $(grep -E "ERROR SUMMARY|non-finite|^rc" "${f%.places}.txt" | tr '\n' ' ')"
      head -12 "$f"
    done
    cat "$out/probe_lstm_compare.txt"
  } 2>&1 | tee "$out/probes_summary.txt"
  for f in "$out"/probe_lstm_*.places; do
    verdicts+=("initcheck $(basename "$f" .places): $([ "$(cat "$f.rc" 2> /dev/null)" = 0 ] && echo \
      "OK (any errors are cuDNN's reads of its own workspace)" || echo "FAILED (errors in our buffers or other kernels)")")
  done
  equal=$(grep -c ' 0 outputs differ.* 0 non-finite' "$out/probe_lstm_compare.txt" 2> /dev/null)
  verdicts+=("NaN-filled cuDNN LSTM, absent vs zero states: ${equal:-0} of 2 precisions equal")
fi
for tool in memcheck racecheck $([ "$quick" != 1 ] && echo initcheck); do
  rc=$(cat "$out/sanitizer-$tool.rc" 2> /dev/null || echo running)
  summary=$(grep -E "ERROR SUMMARY|tests? (passed|ran)" "$out/sanitizer-$tool.log" | tail -6 | tr '\n' ' ')
  verdicts+=("compute-sanitizer $tool: rc $rc ($([ "$rc" = 124 ] && echo 'stopped at its deadline, ')$summary)")
  # The errors printed, per test (the first 3000 of them).
  awk '/\[ RUN/ { test = $NF } /^========= (Uninitialized|Host API|Invalid|Race|Error)/ { n[test]++ }
       END { for (t in n) printf "  %s: %d printed errors in %s\n", tool, n[t], t }' tool="$tool" \
    "$out/sanitizer-$tool.log" | sort | head -20
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
data=data/enwik8-sample/enwik8.head1M
# Sentences of MR's lengths (3-56 words of a 5,000-word vocabulary, 10,662 of them) for the classifier's
# rows: the protocol of configs/classify/mr.yaml without the dataset.
synthetic_mr() {
  python3 -c "
import random
r = random.Random(1)
with open('$out/synthetic_mr.txt', 'w') as f:
    for i in range(10662):
        f.write('%d %s\\n' % (i % 2, ' '.join('w%d' % r.randrange(5000) for _ in range(r.randint(3, 56)))))
"
}
# The wmt configs on Multi30k (carry data/multi30k: scripts/get_data.sh multi30k --mirror DIR), one update
# a batch of up to 5,120 target tokens, lengths padded by data.pad_to_multiple alone (as before the
# configs' length buckets, 2026-11-30: these short sentences make few shapes either way).
m30k=data/multi30k
translate_sets=(--set "data.path=$m30k/train.en.gz" --set "data.target_path=$m30k/train.de.gz"
  --set "data.valid_source=$m30k/val.en.gz" --set "data.valid_target=$m30k/val.de.gz"
  --set "data.test_source=$m30k/test_2016_flickr.en.gz" --set "data.test_target=$m30k/test_2016_flickr.de.gz"
  --set data.vocab_size=8000 --set "data.length_buckets=[]" --set train.accumulate=1 --set train.device=cuda)
# PyTorch's own 16-bit conversions and safetensors writer, for tests/unit/test_float16.cpp to read ours
# against (the committed tests/data/fixtures/torch_float16.safetensors comes from here).
[ "$mode" = run ] && bench torch_float16 python3 tests/data/fixtures/make_torch_float16.py "$final_out/torch_float16.safetensors"
# Where a paper-size step's time goes: every kernel of 3 steps (1 warm-up + 2) under Nsight Compute,
# grouped by name (scripts/ncu_kernel_table.py), against the step time measured above.
profile_step() {  # NAME TIMED_JSON IMPL STEPS SRUBENCH-ARGS...
  local name=$1 timed=$2 impl=$3 steps=$4 csv="$out/ncu_train_$1.csv" step_ms
  shift 4
  bench "ncu_train_$name" ncu --clock-control none --csv --print-units base --print-kernel-base function --log-file "$csv" \
    --metrics gpu__time_duration.sum,dram__bytes.sum $build/srubench --warm-up-seconds 0 train-epoch \
    "$@" --steps $(( steps - 1 )) --warmup-steps 1 --repeats 1
  step_ms=$(python3 -c 'import json, sys; r = [r for r in json.load(open(sys.argv[1]))["rows"] if r["impl"] == sys.argv[2]][0]
print(r["s_per_epoch"] / r["steps_per_epoch"] * 1000)' "$timed" "$impl" 2> /dev/null || echo 0)
  [ -s "$csv" ] && bench "ncu_train_${name}_table" python3 scripts/ncu_kernel_table.py "$csv" --steps "$steps" --step-ms "$step_ms"
}
# The float32 row kernels (softmax, cross-entropy, layer norm: its row in registers since 2026-11-28
# afternoon), dropout's four-element accesses and the SSRU recurrence (docs/gpu-notes.md): the op
# table's bench cases, first in both modes, as they take seconds.
if [ "$mode" = run ]; then
  for op in softmax cross_entropy layer_norm dropout ssru_recurrence fused_attention; do
    bench "ops_$op" $build/srubench ops --device cuda --only $op --repeats 20 --json "$out/ops_$op.json"
  done
  bench ops_fused_attention_bf16 $build/srubench ops --device cuda --only fused_attention --dtype bf16 --repeats 20 \
    --json "$out/ops_fused_attention_bf16.json"
  # The same on the SIMT kernels (SRU_ATTENTION_SIMT=1): what the bf16 tensor-core kernels gain (heads of 64).
  bench ops_fused_attention_bf16_simt env SRU_ATTENTION_SIMT=1 $build/srubench ops --device cuda --only fused_attention \
    --dtype bf16 --repeats 20 --json "$out/ops_fused_attention_bf16_simt.json"
  # The fused attention's peer at the same shape (L 512, B 16, 8 heads of 64, causal), fp32 and bf16.
  bench peer_attention python3 scripts/gpu_peer_bench.py --repeats 20 --json "$out/peer_attention.json" \
    attention --causal --batch 16 --heads 8 --length 512 --dim 64 --dtypes fp32 bf16
  # The three tensor-core kernels (forward, dQ, dK / dV) of one call at that shape under Nsight Compute,
  # the first call skipped: where their time goes (docs/gpu-notes.md "tiles loaded a latency at a time").
  command -v ncu > /dev/null && bench ncu_attention_tc timeout 90 ncu --clock-control none -k 'regex:tc_' \
    --launch-skip 3 --launch-count 3 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section SourceCounters $build/srubench --warm-up-seconds 0 ops --device cuda \
    --only fused_attention --dtype bf16 --repeats 3
fi
# The recurrence with bf16 I/O at the paper char-LM's layer (L 100, B 128, d 1312), two columns a thread
# (the default since 2026-11-30) against one (`--sru-column-pairs off`), timed and under Nsight Compute
# (kernel times and DRAM bytes), then the enwik8 bf16 step without the pairs, beside `train_epoch_bf16`
# or `train_epoch_bf16_70` (docs/gpu-notes.md "the bf16 recurrence two columns a thread").
recurrence_column_pair_rows() {
  local pairs
  for pairs in on off; do
    bench "recurrence_paper_bf16_pairs_$pairs" $build/srubench --warm-up-seconds 0 --sru-column-pairs $pairs sru-vs-lstm \
      --device cuda --precision bf16 --lengths 100 --hidden 1312 --batch 128 --impls recurrence_bf16 copy --repeats 20 \
      --json "$out/recurrence_paper_bf16_pairs_$pairs.json"
    command -v ncu > /dev/null && bench "ncu_recurrence_paper_bf16_pairs_$pairs" timeout 60 ncu --clock-control none \
      -k 'regex:(forward|backward)_kernel' --metrics gpu__time_duration.sum,dram__bytes.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
      $build/srubench --warm-up-seconds 0 --sru-column-pairs $pairs sru-vs-lstm --device cuda --precision bf16 \
      --lengths 100 --hidden 1312 --batch 128 --impls recurrence_bf16 --warmup 1 --repeats 1
  done
  # The layer grid's sizes (B 32: a few blocks an SM, where half the threads may cost more than their
  # fuller registers gain), both ways.
  for pairs in on off; do
    bench "recurrence_grid_bf16_pairs_$pairs" $build/srubench --warm-up-seconds 0 --sru-column-pairs $pairs sru-vs-lstm \
      --device cuda --precision bf16 --lengths 32 128 256 --hidden 256 512 1024 --batch 32 --impls recurrence_bf16 \
      --repeats 20 --json "$out/recurrence_grid_bf16_pairs_$pairs.json"
  done
  bench train_epoch_bf16_pairs_off $build/srubench --warm-up-seconds 0 --sru-column-pairs off train-epoch \
    --config=configs/enwik8.yaml --set train.device=cuda --set train.precision=bf16 --set data.path=$data --steps 20 \
    --warmup-steps 3 --repeats 3 --json "$out/train_epoch_bf16_pairs_off.json"
}
# Replayed steps launched ahead of the read of the step before (train.launch_ahead, 2026-11-30) against
# each read before the next launch: the paper SRU and LSTM at bf16, their idle share (docs/gpu-notes.md
# "steps launched ahead"); 70 steps a repeat, so that the replays dominate.
launch_ahead_rows() {
  local ahead
  for ahead in auto off; do
    bench "train_epoch_bf16_launch_ahead_$ahead" $build/srubench --warm-up-seconds 0 train-epoch \
      --config=configs/enwik8.yaml --config=configs/enwik8-lstm.yaml --set train.device=cuda --set train.precision=bf16 \
      --set train.launch_ahead=$ahead --set data.path=$data --steps 70 --warmup-steps 3 --repeats 3 --idle-share \
      --json "$out/train_epoch_bf16_launch_ahead_$ahead.json"
  done
}
# wmt-base on sentences of WMT-like lengths (Multi30k's pairs joined, scripts/long_pairs.py: 164k pairs,
# ~21 words a side, up to ~190) at the configs' train.accumulate 5 and bf16: the configs' length buckets
# with CUDA graphs against the multiple of 4 alone with graphs (116 shapes, 63% of the steps replayable
# at 64 graphs) and the buckets eager (docs/gpu-notes.md "length buckets"). A warm-up epoch (182 steps)
# first, so that every shape has met its warm-up and capture.
long_sentence_rows() {
  [ -s $m30k/train.en.gz ] || return 0
  python3 scripts/long_pairs.py $m30k/train.en.gz $m30k/train.de.gz "$out/long.en" "$out/long.de" --passes 10
  local name buckets graphs
  for row in "buckets_graphs_auto default auto" "multiple_graphs_auto [] auto" "buckets_graphs_off default off"; do
    read -r name buckets graphs <<< "$row"
    local bucket_set=()
    [ "$buckets" = default ] || bucket_set=(--set "data.length_buckets=$buckets")
    bench "translate_long_acc5_$name" $build/srubench --warm-up-seconds 0 train-epoch \
      --config=configs/translate/wmt-base.yaml "${translate_sets[@]}" --set "data.path=$out/long.en" \
      --set "data.target_path=$out/long.de" --set "data.length_buckets=[12, 16, 20, 24, 32, 40, 48, 64, 80, 104, 128, 160, 200, 256]" \
      "${bucket_set[@]}" --set train.accumulate=5 --set train.precision=bf16 --set train.cuda_graphs=$graphs \
      --steps 30 --warmup-steps 182 --repeats 2 --json "$out/translate_long_acc5_$name.json"
  done
}
# The classifier and the SQuAD reader, their steps replayed as CUDA graphs against every step eager.
replayed_against_eager_rows() {
  # The MR classifier's protocol (configs/classify/mr.yaml: 2 x 128 SRU, batch 32, fixed batches) on
  # synthetic sentences of MR's lengths, padded to multiples of 8: CUDA graphs per batch shape against
  # every step eager. Warm-up covers an epoch's 333 batches, so the timed steps replay.
  synthetic_mr
  for graphs in auto off; do
    bench "train_epoch_classify_graphs_$graphs" $build/srubench --warm-up-seconds 0 train-epoch \
      --config=configs/classify/mr.yaml --set train.device=cuda --set data.path=$out/synthetic_mr.txt \
      --set data.pad_to_multiple=8 --set train.cuda_graphs=$graphs --steps 100 --warmup-steps 340 --repeats 3 \
      --json "$out/train_epoch_classify_graphs_$graphs.json"
  done
  # The SQuAD reader at the paper's sizes (configs/squad.yaml: 6 bidirectional SRU layers of 128, 300-d
  # random embeddings in place of GloVe) on the shipped sample (11 batches of 32 an epoch), paragraphs and
  # questions padded to multiples of 32, replayed against eager (docs/gpu-notes.md "SQuAD captured").
  squad_sample=data/squad-sample/dev-v1.1.sample.json
  for graphs in auto off; do
    bench "train_epoch_squad_graphs_$graphs" $build/srubench --warm-up-seconds 0 train-epoch --config=configs/squad.yaml \
      --set train.device=cuda --set data.path=$squad_sample --set data.valid_path=$squad_sample --set data.vectors= \
      --set data.pad_to_multiple=32 --set train.cuda_graphs=$graphs --steps 11 --warmup-steps 11 --repeats 3 \
      --json "$out/train_epoch_squad_graphs_$graphs.json"
  done
}
if [ "$mode" = focus ]; then
  # 2026-11-30 afternoon: the bf16 recurrence two columns a thread against one (first: minutes).
  recurrence_column_pair_rows
  launch_ahead_rows
  long_sentence_rows
  # After the lease of 2026-11-29 night (docs/gpu-notes.md "the tensor-core attention on ldmatrix and
  # cp.async"): the tensor-core attention with its fragments read by ldmatrix (no transposed tiles), its
  # tiles copied by cp.async two buffers deep, the last query tiles first, beside SDPA; then the steady replayed steps (70 of the sample's 71 an epoch, where 20 left 2 eager ones in each
  # repeat) of the paper SRU and LSTM (its stack in one cuDNN call with cuDNN's dropout, as the config
  # says since 2026-11-29 night), beside their peers at the same steps.
  bench ops_fused_attention_bf16 $build/srubench ops --device cuda --only fused_attention --dtype bf16 --repeats 20 \
    --json "$out/ops_fused_attention_bf16.json"
  bench peer_attention python3 scripts/gpu_peer_bench.py --repeats 20 --json "$out/peer_attention.json" \
    attention --causal --batch 16 --heads 8 --length 512 --dim 64 --dtypes bf16
  command -v ncu > /dev/null && bench ncu_attention_tc timeout 60 ncu --clock-control none -k 'regex:tc_' \
    --launch-skip 3 --launch-count 3 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section WarpStateStats --section SourceCounters $build/srubench --warm-up-seconds 0 ops --device cuda \
    --only fused_attention --dtype bf16 --repeats 3
  # The row kernels' own time (issue 39: softmax, layer norm, column sums >= 60% of copy bandwidth): srubench's
  # rows time each call from the host's enqueue, so a 9 us kernel reads as 16-17 us there; Nsight Compute's
  # durations (caches flushed between kernels) and DRAM bytes, grouped by kernel (docs/gpu-notes.md "the row
  # kernels' own time").
  command -v ncu > /dev/null && for op in softmax layer_norm cross_entropy sum; do
    bench "ncu_row_kernels_$op" timeout 40 ncu --clock-control none --csv --print-units base --print-kernel-base function \
      --metrics gpu__time_duration.sum,dram__bytes.sum --log-file "$out/ncu_row_kernels_$op.csv" \
      $build/srubench --warm-up-seconds 0 ops --device cuda --only $op --repeats 3
    [ -s "$out/ncu_row_kernels_$op.csv" ] && bench "ncu_row_kernels_${op}_table" python3 scripts/ncu_kernel_table.py \
      "$out/ncu_row_kernels_$op.csv" --top 12
  done
  [ -s $m30k/train.en.gz ] && for kernel in fused composed; do
    bench "translate_epoch_${kernel}_bf16" $build/srubench --warm-up-seconds 0 --attention $kernel train-epoch \
      --config=configs/translate/wmt-base.yaml "${translate_sets[@]}" --set train.precision=bf16 --steps 20 \
      --warmup-steps 200 --repeats 3 --json "$out/translate_epoch_${kernel}_bf16.json"
  done
  for precision in tf32 bf16; do
    bench "train_epoch_${precision}_70" $build/srubench --warm-up-seconds 0 train-epoch --config=configs/enwik8.yaml \
      --config=configs/enwik8-lstm.yaml --set train.device=cuda --set train.precision=$precision --set data.path=$data \
      --steps 70 --warmup-steps 3 --repeats 3 --json "$out/train_epoch_${precision}_70.json"
  done
  for peer in "--matmul-precision high" "--amp fp16"; do
    name=peer_train_$(echo "$peer" | awk '{print $2}')_70
    # shellcheck disable=SC2086  # $peer is an option and its value
    bench "$name" python3 scripts/gpu_peer_bench.py $peer --sru-src $carry/sru_ref --repeats 3 --json "$out/$name.json" \
      train --config configs/enwik8.yaml configs/enwik8-lstm.yaml --data $data --steps 70
  done
  say "done"
  printf '%s\n' "${verdicts[@]}" | tee "$out/verdicts.txt" "$final_out/verdicts.txt"
  exit 0
fi
# 0. The newest changes first (2026-11-30): the bf16 recurrence two columns a thread against one, and
# replayed steps launched ahead of the read of the step before.
recurrence_column_pair_rows
launch_ahead_rows
# 1. The paper-size configs at every precision, ours and the peers' at theirs, side by side; with
# --idle-share, as many steps again under CUPTI's activity records: the GPU's idle share of a step.
paper=(configs/enwik8.yaml configs/enwik8-lstm.yaml)
# The host profile (`srubench --host-profile`, a second pass after the timed one) of the rows to explain.
declare -A host_profile_at_bf16=([bf16]=--host-profile) host_profile_at_tf32=([tf32]=--host-profile)
# LEASE_FULL=1: also the rows that an earlier lease measured and no change since touches (fp32, the fp32
# and fp16 peers, the layer grid at tf32 with its peer, the small configs' peers, the translation rows
# of 2026-11-29 evening listed below); default off for a short lease.
full=${LEASE_FULL:-0}
for precision in bf16 tf32 $([ "$full" = 1 ] && echo fp32); do
  # shellcheck disable=SC2086  # the host-profile flag or nothing
  bench "train_epoch_$precision" $build/srubench --warm-up-seconds 0 train-epoch "${paper[@]/#/--config=}" \
    --set train.device=cuda --set train.precision=$precision --set data.path=$data --steps 20 --warmup-steps 3 \
    --repeats 3 ${host_profile_at_bf16[$precision]:-} --idle-share --json "$out/train_epoch_$precision.json"
done
# The bf16 and tf32 rows again with every step eager (train.cuda_graphs off; the rows above replay the
# captured step where it captures, the LSTM's too since 2026-11-29): what the graph gains (issue 38
# item 5, docs/gpu-notes.md).
for precision in bf16 tf32; do
  bench "train_epoch_${precision}_eager" $build/srubench --warm-up-seconds 0 train-epoch "${paper[@]/#/--config=}" \
    --set train.device=cuda --set train.precision=$precision --set train.cuda_graphs=off --set data.path=$data \
    --steps 20 --warmup-steps 3 --repeats 3 --json "$out/train_epoch_${precision}_eager.json"
done
# The paper LSTM with one cuDNN call per layer and the CPU's masks between them (model.cudnn_dropout
# false; the config's true, the stack in one call with cuDNN's dropout, is in the rows above), replayed.
for precision in tf32 bf16; do
  bench "train_epoch_lstm_per_layer_$precision" $build/srubench --warm-up-seconds 0 train-epoch \
    --config=configs/enwik8-lstm.yaml --set train.device=cuda --set train.precision=$precision \
    --set model.cudnn_dropout=false --set data.path=$data --steps 20 --warmup-steps 3 --repeats 3 --idle-share \
    --json "$out/train_epoch_lstm_per_layer_$precision.json"
done
if [ "$quick" != 1 ]; then
  train_peers=("--amp fp16" "--amp bf16" "--matmul-precision high")
  [ "$full" = 1 ] && train_peers+=("--matmul-precision highest")
  for peer in "${train_peers[@]}"; do
    name=peer_train_$(echo "$peer" | awk '{print $2}')
    # shellcheck disable=SC2086  # $peer is an option and its value
    bench "$name" python3 scripts/gpu_peer_bench.py $peer --sru-src $carry/sru_ref --repeats 3 --json "$out/$name.json" \
      train --config "${paper[@]}" --data $data --steps 20
  done
fi
# Translation at the paper's model sizes (the `translate_sets` above): ours at tf32 and bf16 as the configs
# say (lengths rounded to multiples of 4, every step replayed from its shape's graph once the warm-up has
# covered an epoch's shapes: 22, all within train.cuda_graphs_max's 64, docs/gpu-notes.md "Graphs
# planned"), then unpadded with every step eager (the configs' default before 2026-11-29 night), then
# torch's nn.Transformer base at its fastest settings on batches of 328 pairs of 16 / 15 tokens, unpadded.
if [ -s $m30k/train.en.gz ]; then
  for precision in tf32 bf16; do
    bench "translate_epoch_$precision" $build/srubench --warm-up-seconds 0 train-epoch \
      --config=configs/translate/wmt-base.yaml --config=configs/translate/wmt-sru-4.yaml "${translate_sets[@]}" \
      --set train.precision=$precision --steps 20 --warmup-steps 200 --repeats 3 --idle-share \
      --json "$out/translate_epoch_$precision.json"
  done
  for precision in tf32 bf16; do
    # shellcheck disable=SC2086  # the host-profile flag or nothing
    bench "translate_epoch_unpadded_$precision" $build/srubench --warm-up-seconds 0 train-epoch \
      --config=configs/translate/wmt-base.yaml --config=configs/translate/wmt-sru-4.yaml "${translate_sets[@]}" \
      --set train.precision=$precision --set data.pad_to_multiple=0 --steps 20 --warmup-steps 3 --repeats 3 \
      ${host_profile_at_tf32[$precision]:-} --idle-share --json "$out/translate_epoch_unpadded_$precision.json"
  done
  # The same step with the fused attention (srubench --attention fused; the default is composed since
  # 2026-11-29): the tensor-core kernels' loads and stores of 2026-11-29 night in the step (docs/gpu-notes.md).
  bench translate_epoch_fused_bf16 $build/srubench --warm-up-seconds 0 --attention fused train-epoch \
    --config=configs/translate/wmt-base.yaml "${translate_sets[@]}" --set train.precision=bf16 --steps 20 \
    --warmup-steps 200 --repeats 3 --json "$out/translate_epoch_fused_bf16.json"
  # Lengths rounded to multiples of 8: 16-byte aligned bf16 rows in the attention's products too.
  bench translate_epoch_pad8_bf16 $build/srubench --warm-up-seconds 0 train-epoch \
    --config=configs/translate/wmt-base.yaml "${translate_sets[@]}" --set train.precision=bf16 \
    --set data.pad_to_multiple=8 --steps 20 --warmup-steps 200 --repeats 3 --idle-share \
    --json "$out/translate_epoch_pad8_bf16.json"
  if [ "$full" = 1 ]; then
    # wmt-base with the SSRU decoder (model.decoder ssru-transformer, docs/architecture.md).
    bench translate_epoch_ssru_bf16 $build/srubench --warm-up-seconds 0 train-epoch --config=configs/translate/wmt-base.yaml \
      "${translate_sets[@]}" --set model.decoder=ssru-transformer --set train.precision=bf16 --steps 20 --warmup-steps 3 \
      --repeats 3 --json "$out/translate_epoch_ssru_bf16.json"
    # wmt-base with lengths rounded to multiples of 8 (data.pad_to_multiple), its steps replayed as CUDA
    # graphs per batch shape against eager (train.cuda_graphs off); the warm-up covers an epoch's batches
    # (srubench caps it at one), so that the timed steps replay; the median of 3 repeats leaves out the
    # first, which captures the shapes met once an epoch (issue 38 item 5, docs/gpu-notes.md).
    for graphs in auto off; do
      bench "translate_epoch_pad8_graphs_$graphs" $build/srubench --warm-up-seconds 0 train-epoch \
        --config=configs/translate/wmt-base.yaml "${translate_sets[@]}" --set train.precision=bf16 \
        --set data.pad_to_multiple=8 --set train.cuda_graphs=$graphs --steps 20 --warmup-steps 200 --repeats 3 \
        --json "$out/translate_epoch_pad8_graphs_$graphs.json"
    done
    # The same at the wmt configs' train.accumulate 5: a graph per batch (by shape, first or later) and
    # one for the update (docs/gpu-notes.md "accumulated steps captured").
    for graphs in auto off; do
      bench "translate_epoch_pad8_acc5_graphs_$graphs" $build/srubench --warm-up-seconds 0 train-epoch \
        --config=configs/translate/wmt-base.yaml "${translate_sets[@]}" --set train.precision=bf16 \
        --set data.pad_to_multiple=8 --set train.accumulate=5 --set train.cuda_graphs=$graphs --steps 10 \
        --warmup-steps 60 --repeats 3 --json "$out/translate_epoch_pad8_acc5_graphs_$graphs.json"
    done
  fi  # full
  if [ "$quick" != 1 ]; then
    translate_peers=("--matmul-precision high" "--amp bf16")
    [ "$full" = 1 ] && translate_peers+=("--amp fp16")
    for peer in "${translate_peers[@]}"; do
      name=peer_translate_$(echo "$peer" | awk '{print $2}')
      # shellcheck disable=SC2086  # $peer is an option and its value
      bench "$name" python3 scripts/gpu_peer_bench.py $peer --repeats 3 --json "$out/$name.json" \
        translate --config configs/translate/wmt-base.yaml --vocab 8000 --steps 20
    done
  fi
else
  verdicts+=("translation benchmarks: skipped ($m30k not carried)")
fi
# 2. Where a paper-size step's time goes (profile_step, above).
if command -v ncu > /dev/null && [ "$quick" != 1 ]; then
  for precision in bf16 tf32; do
    profile_step "$precision" "$out/train_epoch_$precision.json" enwik8 3 --config=configs/enwik8.yaml \
      --set train.device=cuda --set train.precision="$precision" --set data.path=$data
  done
  # wmt-base as the config pads it, its steps eager (a graph would profile its capture), against the
  # replayed rows' step time: the kernels a replay runs (at tf32: no FFMA GEMMs left, gpu-notes).
  [ -s $m30k/train.en.gz ] && for precision in tf32 bf16; do
    profile_step "wmt_base_$precision" "$out/translate_epoch_$precision.json" wmt-base 2 \
      --config=configs/translate/wmt-base.yaml "${translate_sets[@]}" --set train.precision=$precision \
      --set train.cuda_graphs=off
  done
fi
# 3. The layer grid and the small configs, ours and the peers'.
sizes=(--lengths 32 128 256 --hidden 256 512 1024 --batch 32)
for precision in bf16 $([ "$full" = 1 ] && echo tf32); do
  bench "sru_vs_lstm_$precision" $build/srubench --warm-up-seconds 0 sru-vs-lstm --device cuda --precision $precision \
    "${sizes[@]}" --repeats 20 --impls gemm recurrence copy sru_fused lstm_cudnn --json "$out/sru_vs_lstm_$precision.json"
done
# (The recurrence row writes grad x since 2026-11-27: an srubench from before that does less work.)
if [ -x $build/srubench-before ]; then
  bench sru_vs_lstm_before $build/srubench-before --warm-up-seconds 0 sru-vs-lstm --device cuda "${sizes[@]}" --repeats 20 \
    --impls recurrence copy sru_fused --json "$out/sru_vs_lstm_before.json"
fi
[ "$quick" != 1 ] && [ "$full" = 1 ] && bench peer_layer_tf32 python3 scripts/gpu_peer_bench.py --matmul-precision high --sru-src $carry/sru_ref \
  --json "$out/peer_layer_tf32.json" layer "${sizes[@]}"
small=(configs/enwik8-small.yaml configs/enwik8-small-lstm.yaml)
bench train_epoch_small $build/srubench --warm-up-seconds 0 train-epoch "${small[@]/#/--config=}" --set train.device=cuda \
  --set data.path=$data --steps 20 --warmup-steps 3 --repeats 3 --json "$out/train_epoch_small.json"
replayed_against_eager_rows
# The small SRU config with every step eager (train.cuda_graphs off): the graph's gain where a step is
# short (~1.4 ms) and its launches weigh most.
bench train_epoch_small_eager $build/srubench --warm-up-seconds 0 train-epoch --config=configs/enwik8-small.yaml \
  --set train.device=cuda --set train.cuda_graphs=off --set data.path=$data --steps 20 --warmup-steps 3 --repeats 3 \
  --json "$out/train_epoch_small_eager.json"
[ "$quick" != 1 ] && [ "$full" = 1 ] && bench peer_train_small python3 scripts/gpu_peer_bench.py --sru-src $carry/sru_ref --repeats 3 \
  --json "$out/peer_train_small.json" train --config "${small[@]}" --data $data --steps 20
# 4. The recurrence under Nsight Compute at L 256, d 1024, B 32: every kernel's time in one forward +
# backward, then the SRU kernels' sections (clocks left as they are).
if command -v ncu > /dev/null; then
  bench ncu_kernels ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum "${one_run[@]}"
  [ "$quick" != 1 ] && bench ncu_recurrence ncu --clock-control none -k 'regex:(forward|backward)_kernel' --launch-skip 2 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section LaunchStats "${one_run[@]}"
fi
say "done"
printf '%s\n' "${verdicts[@]}" | tee "$out/verdicts.txt" "$final_out/verdicts.txt"
