#!/usr/bin/env bash
# The reproduction checks and the generated results tables: scripts/reproduce/check.py passes a summary
# within its threshold, and fails one that is worse (or missing, or without the metric) with a message that
# names the run, the metric, the threshold and the value; every generated table of docs/results.md is what
# scripts/results_tables.py makes of results/*.json; the ci thresholds cover every ci-scale run of ci.sh.
# Usage: reproduce_check.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work/out/charlm"
cat > "$work/thresholds.json" <<'JSON'
{"charlm/sru": {"test.bpc": {"max": 3.5, "measured": 3.2, "from": "a test"}},
 "charlm/lstm": {"valid.bpc": {"max": 3.5, "measured": 3.3, "from": "a test"}}}
JSON
echo '{"metrics": {"test.bpc": 3.4}}' > "$work/out/charlm/sru.json"
echo '{"metrics": {"valid.bpc": 3.1}}' > "$work/out/charlm/lstm.json"
python3 "$src/scripts/reproduce/check.py" "$work/thresholds.json" "$work/out" || fail "summaries within the thresholds failed"
echo '{"metrics": {"test.bpc": 4.1234}}' > "$work/out/charlm/sru.json"
if out=$(python3 "$src/scripts/reproduce/check.py" "$work/thresholds.json" "$work/out"); then
  fail "a worse metric passed: $out"
fi
grep -q "FAIL charlm/sru: test.bpc = 4.1234 is worse than the threshold: at most 3.5000" <<< "$out" \
  || fail "the message does not name the metric, the value and the threshold: $out"
echo '{"metrics": {"test.bpc": NaN}}' > "$work/out/charlm/sru.json"
! python3 "$src/scripts/reproduce/check.py" "$work/thresholds.json" "$work/out" > /dev/null || fail "NaN passed"
rm "$work/out/charlm/lstm.json"
out=$(python3 "$src/scripts/reproduce/check.py" "$work/thresholds.json" "$work/out") && fail "a missing summary passed"
grep -q "FAIL charlm/lstm: no summary" <<< "$out" || fail "a missing summary is not named: $out"
python3 "$src/scripts/results_tables.py" --check || fail "docs/results.md is not what scripts/results_tables.py makes"
# Every run a ci-scale reproduction makes has a threshold (names: experiment/run).
python3 - "$src/scripts/reproduce/thresholds-ci.json" <<'PY' || fail "thresholds-ci.json does not cover every ci-scale run"
import json, sys
have = {k for k in json.load(open(sys.argv[1])) if not k.startswith("_")}
want = {"charlm/sru", "charlm/lstm", "classify/mr", "classify/mr-lstm", "squad/sru", "squad/lstm"}
missing = want - have
print("thresholds for", sorted(have), "missing:", sorted(missing))
sys.exit(1 if missing else 0)
PY
echo "ok"
