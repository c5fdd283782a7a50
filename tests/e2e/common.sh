# Shared start of the end-to-end scripts (cli.sh, mpi.sh), sourced after they set $build and $src:
# the binaries, the tiny char-LM config and its data, a work directory removed on exit, and helpers.
train=$build/srutrain eval=$build/srueval
data=$src/data/enwik8-sample/enwik8.head1M
tiny=$src/tests/data/tiny.yaml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
# matches REGEX TEXT: grep on a here-string, because `echo | grep -q` under pipefail fails at random
# when grep exits before the writer has finished (SIGPIPE).
matches() { grep -Eq -- "$1" <<< "$2"; }
# same_losses RUN_A RUN_B [TOL]: both run directories logged the same training steps, each step's last
# logged loss (a resumed run logs the steps after its checkpoint again) within TOL (default 1e-5;
# relative, absolute for |loss| < 1).
same_losses() {
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "${3:-1e-5}" << 'PY'
import json, sys
def losses(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if "loss" in r and "split" not in r and "eval" not in r:
            out[r["step"]] = r["loss"]
    return out
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
worst = max((abs(a[s] - b[s]) / max(1.0, abs(a[s])) for s in a if s in b), default=0.0)
print(f"{len(a)} and {len(b)} steps, largest difference {worst:.3g} (tolerance {tol:g})")
sys.exit(0 if a.keys() == b.keys() and len(a) > 0 and worst <= tol else 1)
PY
}
# The training losses of a run directory, one "step loss" a line.
losses() { grep '"loss"' "$1/metrics.jsonl" | grep -v '"eval"' | sed 's/.*"step":\([0-9]*\).*"loss":\([^,]*\),.*/\1 \2/'; }
# 300 "LABEL text" lines (the classify format) whose last word ("yes"/"no") is the label, after 1-8
# random filler words; the same lines every time.
last_word_sentences() {
  local i w label line
  RANDOM=7
  for i in $(seq 300); do
    label=$((RANDOM % 2)) line=""
    for w in $(seq $((1 + RANDOM % 8))); do line="$line w$((RANDOM % 15))"; done
    echo "$label$line $([ $label = 1 ] && echo yes || echo no)"
  done
}
