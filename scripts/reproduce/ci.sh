#!/usr/bin/env bash
# Every reproduction at --scale ci (and two settings of classify_ablations.sh, as a smoke test), then the
# thresholds: fails (exit 1) when a metric is worse than its bound in scripts/reproduce/thresholds-ci.json,
# naming the run, the metric, the threshold and the value.
# .ci/run calls it after the unit tests.
#
#   scripts/reproduce/ci.sh [--out DIR] [--threads N] [--jobs 1|2] [--set KEY=VALUE ...] [--record]
#
# --out: default runs/reproduce-ci, emptied first (a ci check never reuses old runs). --set goes to every
# run (e.g. --set train.lr=0.3 to see a worsened model fail the check). --jobs 2: the runs in two lanes
# side by side, each run on one thread (.ci/run: the small models gain 1.4x from a second thread, two
# at once 2x; the metrics are those of one lane, the speeds are not comparable). --record copies the
# summaries to results/ci/ and regenerates the tables of docs/results.md (scripts/results_tables.py);
# it needs --jobs 1, the default, whose throughputs the tables show.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=runs/reproduce-ci record=0 jobs=1
pass=() threads=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --record) record=1; shift ;;
    --threads) threads=("$1" "$2"); shift 2 ;;
    --set) pass+=("$1" "$2"); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ci.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
case $jobs in
  1) ;;
  2) [ $record = 0 ] || { echo "ci.sh: --record needs --jobs 1 (the tables show each run's speed alone)" >&2; exit 1; }
     threads=(--threads 1) ;;
  *) echo "ci.sh: --jobs must be 1 or 2, not '$jobs'" >&2; exit 1 ;;
esac
rm -rf "$out"
mkdir -p "$out"
start=$SECONDS

# step NAME COMMAND...: one reproduction, timed.
step() {
  local name=$1 t=$SECONDS
  shift
  "$@" --scale ci --out "$out" "${threads[@]+"${threads[@]}"}" "${pass[@]+"${pass[@]}"}"
  echo "== $name: $((SECONDS - t)) s"
}
ablations() { scripts/reproduce/classify_ablations.sh --settings "base tanh" "$@"; }
translate_model() { local model=$1; shift; scripts/reproduce/translate.sh --models "$model" "$@"; }

if [ "$jobs" = 1 ]; then
  for experiment in charlm classify squad ptb srupp translate; do
    step "$experiment" scripts/reproduce/$experiment.sh
  done
  step "classify ablations (base, tanh)" ablations
else
  # Two lanes of about equal time on one thread each (2026-11-27, 2 cores: about 5 minutes each); the
  # two translation models, most of the time, one per lane. A lane's output is shown when it ends.
  lane_a() {
    step "translate base" translate_model base
    step charlm scripts/reproduce/charlm.sh
  }
  lane_b() {
    step "translate sru-4" translate_model sru-4
    for experiment in squad srupp ptb classify; do step "$experiment" scripts/reproduce/$experiment.sh; done
    step "classify ablations (base, tanh)" ablations
  }
  # Built once here, not by both lanes at once (lib.sh builds what is missing).
  if [ ! -x "${SRUTRAIN:-build/srutrain}" ] || [ ! -x "${SRUEVAL:-build/srueval}" ]; then scripts/build.sh > /dev/null; fi
  lane_a > "$out/lane-a.log" 2>&1 & pid_a=$!
  lane_b > "$out/lane-b.log" 2>&1 & pid_b=$!
  status=0
  wait $pid_a || status=1
  wait $pid_b || status=1
  sed 's/^/[lane a] /' "$out/lane-a.log"
  sed 's/^/[lane b] /' "$out/lane-b.log"
  [ $status = 0 ] || { echo "ci.sh: a reproduction failed (above)" >&2; exit 1; }
fi
echo "== all ci-scale reproductions: $((SECONDS - start)) s"
python3 scripts/reproduce/check.py scripts/reproduce/thresholds-ci.json "$out"
if [ $record = 1 ]; then
  rm -rf results/ci && mkdir -p results/ci
  for f in "$out"/*/*.json; do
    e=$(basename "$(dirname "$f")")
    mkdir -p "results/ci/$e" && cp "$f" "results/ci/$e/"
  done
  python3 scripts/results_tables.py
fi
