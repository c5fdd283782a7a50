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
