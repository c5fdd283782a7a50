#!/usr/bin/env bash
# Every reproduction at --scale ci (and two settings of classify_ablations.sh, as a smoke test), then the
# thresholds: fails (exit 1) when a metric is worse than its bound in scripts/reproduce/thresholds-ci.json,
# naming the run, the metric, the threshold and the value.
# .ci/run calls it after the unit tests.
#
#   scripts/reproduce/ci.sh [--out DIR] [--threads N] [--set KEY=VALUE ...] [--record]
#
# --out: default runs/reproduce-ci, emptied first (a ci check never reuses old runs). --set goes to every
# run (e.g. --set train.lr=0.3 to see a worsened model fail the check). --record copies the summaries to
# results/ci/ and regenerates the tables of docs/results.md (scripts/results_tables.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=runs/reproduce-ci record=0
pass=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --record) record=1; shift ;;
    --threads|--set) pass+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ci.sh: unknown argument '$1'" >&2; exit 1 ;;
  esac
done
rm -rf "$out"
start=$SECONDS
for experiment in charlm classify squad ptb srupp translate; do
  t=$SECONDS
  scripts/reproduce/$experiment.sh --scale ci --out "$out" "${pass[@]+"${pass[@]}"}"
  echo "== $experiment: $((SECONDS - t)) s"
done
t=$SECONDS
scripts/reproduce/classify_ablations.sh --scale ci --out "$out" --settings "base tanh" "${pass[@]+"${pass[@]}"}"
echo "== classify ablations (base, tanh): $((SECONDS - t)) s"
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
