#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang, ASan and UBSan into build-fuzz/ and runs each
# for SECONDS (default 30) on a copy of its committed corpus (tests/fuzz/corpus/TARGET), then prints
# one line per target: executions, coverage (cov: edges, ft: features), corpus size and crashes.
# Crashing inputs are kept in build-fuzz/crashes/TARGET/ (the corpus grows in build-fuzz/fuzz-corpus/);
# a fixed one belongs in the committed corpus, where the normal test suite replays it (ctest
# fuzz_replay_TARGET).
#   scripts/fuzz.sh [SECONDS] [TARGET ...]      SRU_FUZZ_JOBS=N runs N targets at once (default 1)
# SRU_FUZZ_SEED=N fixes libFuzzer's seed (CI: the same inputs every run, so a red run is the change's,
# not chance); the default 0 lets libFuzzer pick one (campaigns).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
scripts/setup.sh clang libomp-dev libclang-rt-14-dev llvm-14  # runtimes of ASan/UBSan/libFuzzer; llvm-symbolizer
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(sed -n 's/^set(SRU_FUZZ_TARGETS \(.*\))$/\1/p' CMakeLists.txt))
# SRU_FUZZ_BUILD_DIR: a build already configured with SRU_FUZZ=ON (CI reuses scripts/sanitize.sh's
# build-asan, which builds the tests and the fuzz targets with clang at once).
build=${SRU_FUZZ_BUILD_DIR:-build-fuzz}
if ! grep -q '^SRU_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DSRU_FUZZ=ON -DSRU_CUDA=OFF -DSRU_MPI=OFF \
    -DSRU_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
fi
cmake --build "$build" --target "${targets[@]/#/fuzz_}"
summary=$build/fuzz-summary.txt
: > "$summary"
status=0
run_one() {
  local t=$1 work=$build/fuzz-corpus/$1 crashes=$build/crashes/$1 log=$build/fuzz-$1.log
  rm -rf "$work" "$crashes"; mkdir -p "$work" "$crashes"
  cp tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  # -rss_limit_mb / -malloc_limit_mb: an allocation driven by a size field in the input is a finding.
  local rc=0 runs cov ft corp found
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build"/tests/fuzz/fuzz_"$t" -max_total_time="$seconds" -seed="${SRU_FUZZ_SEED:-0}" -max_len=8192 -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -artifact_prefix="$crashes/" -print_final_stats=1 "$work" > "$log" 2>&1 \
    || rc=$?
  # (|| true: under set -e and pipefail a grep that matches nothing would end this function early)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  corp=$(ls "$work" | wc -l)
  found=$(ls "$crashes" | wc -l)
  echo "$t: ${seconds} s, ${runs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp}, crashes ${found}, exit ${rc}" | tee -a "$summary"
  [ "$rc" = 0 ] && [ "$found" = 0 ]
}
jobs=${SRU_FUZZ_JOBS:-1}
pids=()
for t in "${targets[@]}"; do
  if [ "$jobs" -gt 1 ]; then
    run_one "$t" & pids+=($!)
    if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || status=1; pids=("${pids[@]:1}"); fi
  else
    run_one "$t" || status=1
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status = 0 ] && echo "fuzz: no crashes in ${#targets[@]} targets" || echo "fuzz: crashes found (logs $build/fuzz-*.log, inputs $build/crashes/)"
exit $status
