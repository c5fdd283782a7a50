#!/usr/bin/env bash
# Data-parallel training under mpirun, two ranks on this machine: the losses and evaluations equal a
# single process's with the same global batch; resume moves between 2 ranks and 1; a killed or stopped
# rank ends the job with an error naming it, in bounded time, leaving the last checkpoint good; Ctrl-C
# on one rank stops both with a checkpoint; a batch that does not divide is refused; --device-info and
# srubench know the ranks. Usage: mpi.sh BUILD_DIR SOURCE_DIR MPIRUN CASE. Exit 77 (skipped) without
# mpirun or without MPI in the build. SRU_MPI_TEST_DEVICE=cuda (scripts/gpu_check.sh, with two GPUs or
# more) trains on the GPUs through NCCL instead, comparing losses within SRU_MPI_TEST_TOL.
set -uo pipefail
build=$1 src=$2 mpirun=$3 case=$4
source "$src/tests/e2e/common.sh"

if [ -z "$mpirun" ] || ! command -v "$mpirun" > /dev/null; then echo "SKIPPED: no mpirun (Debian: openmpi-bin)"; exit 77; fi
matches "MPI built" "$("$train" --device-info)" || { echo "SKIPPED: srutrain was built without MPI"; exit 77; }
mpi_flags=()
if matches "Open MPI|OpenRTE" "$("$mpirun" --version 2>&1)"; then
  # Root in CI; more ranks than cores is fine; no core binding (each rank runs its own threads).
  mpi_flags=(--allow-run-as-root --oversubscribe --bind-to none)
  # Containers often forbid the cross-process memory copies of Open MPI's shared-memory transport.
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
fi
device=(--set train.device="${SRU_MPI_TEST_DEVICE:-cpu}")
tol=${SRU_MPI_TEST_TOL:-1e-5}
mpi() { local n=$1; shift; "$mpirun" -np "$n" "${mpi_flags[@]}" "$@"; }
tiny_run() { "$train" --config "$tiny" --set data.path="$data" "${device[@]}" "$@"; }
tiny_mpi() { mpi 2 "$train" --config "$tiny" --set data.path="$data" "${device[@]}" "$@"; }
# The pid of rank R of the mpirun job started in the background as MP (a descendant: MP is the shell
# running mpirun, whose children on this machine are the ranks).
rank_pid() {
  local r=$2 p todo=("$1")
  while [ ${#todo[@]} -gt 0 ]; do
    p=${todo[0]} todo=("${todo[@]:1}")
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$r"; then echo "$p"; return; fi
    todo+=($(pgrep -P "$p"))
  done
}
# Starts a long 2-rank tiny run in the background (sets mp) and waits until it has logged a step.
start_long_run() {
  tiny_mpi --run-dir "$work/run" --set train.max_steps=100000 "$@" > "$work/log" 2>&1 &
  mp=$!
  for _ in $(seq 200); do [ -s "$work/run/metrics.jsonl" ] && break; sleep 0.1; done
  [ -s "$work/run/metrics.jsonl" ] || { cat "$work/log"; fail "the 2-rank run did not start"; }
}
# Waits up to $1 seconds for the background mpirun; kills it and fails when it does not end.
wait_bounded() {
  local limit=$1 t=0
  while kill -0 "$mp" 2> /dev/null; do
    sleep 0.2; t=$((t + 1))
    [ $t -lt $((limit * 5)) ] || { kill -9 "$mp"; cat "$work/log"; fail "mpirun did not end within $limit s"; }
  done
  wait "$mp"
}

case $case in
  equal)
    # The same global batch of 4 streams: one process, or two ranks of 2 streams each. Every dropout
    # (embedding, SRU layers, output) draws the single process's masks for each rank's rows, so the
    # losses differ only by the order of float32 additions (each rank sums its half; then the halves).
    set -- --set model.embedding_dropout=0.1
    tiny_run "$@" --run-dir "$work/one" > "$work/one.log" 2>&1 || { cat "$work/one.log"; fail "1-process run failed"; }
    tiny_mpi "$@" --run-dir "$work/two" > "$work/two.log" 2>&1 || { cat "$work/two.log"; fail "2-rank run failed"; }
    same_losses "$work/one" "$work/two" "$tol" || fail "2-rank losses differ from the single process's"
    grep -q '"world_size": 2' "$work/two/summary.json" && grep -Eq '"backend": "mpi(\+nccl)?"' "$work/two/summary.json" \
      || fail "summary.json does not name 2 ranks over mpi"
    grep -Eq "data parallel: 2 processes \(mpi(\+nccl)?\), global batch 4 = 2 per process; rank 0: (cpu|cuda:0) on .*, rank 1: (cpu|cuda:1) on" \
      "$work/two.log" || fail "the log does not describe the ranks"
    # The same files (the events file's name holds its time and writer's pid), one events file each.
    files() { ls "$1" | sed 's/^events\.out\.tfevents\..*/events.out.tfevents/'; }
    [ ! -e "$work/two/rank1" ] && [ "$(files "$work/two")" = "$(files "$work/one")" ] &&
      [ "$(ls "$work/two" | grep -c '^events\.out\.tfevents\.')" = 1 ] || fail "rank 1 wrote files"
    # Evaluation is split across the ranks (streams 0-1 and 2-3) and summed: the single process's numbers.
    python3 - "$work/one/summary.json" "$work/two/summary.json" <<'PY' || fail "evaluations differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for split in ("valid", "test"):
    x, y = a["final"][split]["bpc"], b["final"][split]["bpc"]
    print(split, "bpc", x, y)
    assert abs(x - y) <= 1e-5 * x and a["final"][split]["chars"] == b["final"][split]["chars"]
PY
    # Buckets of 1 KiB: they start during backward, in order; the sums are the same additions.
    tiny_mpi "$@" --set train.dist_bucket_mb=0.001 --run-dir "$work/buckets" > "$work/b.log" 2>&1 \
      || { cat "$work/b.log"; fail "run with small buckets failed"; }
    diff <(losses "$work/two") <(losses "$work/buckets") || fail "small buckets changed the losses"
    echo "ok: char-LM: 2 ranks follow 1 process; small buckets give identical losses"
    # train.accumulate 2 (and label smoothing): each rank sums its two batches, the ranks sum once a step.
    set -- --set model.embedding_dropout=0.1 --set train.accumulate=2 --set train.label_smoothing=0.1 --set train.max_steps=6
    tiny_run "$@" --run-dir "$work/acc1" > "$work/acc1.log" 2>&1 || { cat "$work/acc1.log"; fail "1-process accumulate run failed"; }
    tiny_mpi "$@" --run-dir "$work/acc2" > "$work/acc2.log" 2>&1 || { cat "$work/acc2.log"; fail "2-rank accumulate run failed"; }
    same_losses "$work/acc1" "$work/acc2" "$tol" || fail "2-rank accumulate losses differ from the single process's"
    echo "ok: char-LM with train.accumulate 2: 2 ranks follow 1 process"
    # Classification (bidirectional SRU, dropout everywhere): batches of 16 split 8 + 8 after the same
    # shuffle, the epoch's short last batch unevenly, weighted by each rank's share of examples.
    last_word_sentences > "$work/sents.txt"
    set -- --config "$src/tests/data/classify_tiny.yaml" --set data.path="$work/sents.txt" --set data.fold=0 "${device[@]}" \
      --set train.epochs=2 --set log.every_steps=1 --set model.bidirectional=true --set model.dropout=0.2 \
      --set model.embedding_dropout=0.2 --set model.output_dropout=0.2
    "$train" "$@" --run-dir "$work/c1" > "$work/c1.log" 2>&1 || { cat "$work/c1.log"; fail "1-process classify failed"; }
    mpi 2 "$train" "$@" --run-dir "$work/c2" > "$work/c2.log" 2>&1 || { cat "$work/c2.log"; fail "2-rank classify failed"; }
    same_losses "$work/c1" "$work/c2" "$tol" || fail "2-rank classify losses differ"
    python3 - "$work/c1/summary.json" "$work/c2/summary.json" <<'PY' || fail "classify evaluations differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print("test accuracy", a["final"]["test"]["accuracy"], b["final"]["test"]["accuracy"])
assert a["final"]["test"]["accuracy"] == b["final"]["test"]["accuracy"]
assert abs(a["final"]["test"]["loss"] - b["final"]["test"]["loss"]) <= 1e-5
PY
    echo "ok: classify: 2 ranks follow 1 process"
    ;;
  translate|translate_bleu)
    # Translation (a Transformer with SRU feed-forward sublayers, dropout everywhere): each token-budget
    # batch split between the ranks by sentences, padded as the whole batch, weighted by each rank's
    # target pieces; the validation loss and the translations (greedy) shared, so BLEU is the same.
    # `translate` checks the split and the gathering on 6-step runs; `translate_bleu` trains a model
    # that translates (600 steps, one process) for the BLEU comparison: it is the long one, and
    # scripts/sanitize.sh leaves it out (its extra code under ASan is one process's training).
    python3 "$src/scripts/reproduce/make_data.py" parallel "$work/pairs" > /dev/null
    set -- --config "$src/configs/translate/multi30k-sru-4.yaml" "${device[@]}" --set data.path="$work/pairs/train.en" \
      --set data.target_path="$work/pairs/train.de" --set data.valid_source="$work/pairs/valid.en" \
      --set data.valid_target="$work/pairs/valid.de" --set data.test_source= --set data.test_target= \
      --set data.vocab_size=100 --set data.max_tokens=300 --set model.embedding_size=16 --set model.hidden_size=16 \
      --set model.ff_size=32 --set model.num_layers=2 --set model.dropout=0.2 --set model.attn_dropout=0.1 \
      --set train.max_steps=6 --set train.warmup_steps=3 --set train.label_smoothing=0.1 --set log.every_steps=1 \
      --set eval.every_steps=0 --set eval.max_len_b=5 --set eval.max_len_a=0.5
    if [ "$case" = translate ]; then
      "$train" "$@" --run-dir "$work/t1" > "$work/t1.log" 2>&1 || { cat "$work/t1.log"; fail "1-process translate failed"; }
      mpi 2 "$train" "$@" --run-dir "$work/t2" > "$work/t2.log" 2>&1 || { cat "$work/t2.log"; fail "2-rank translate failed"; }
      same_losses "$work/t1" "$work/t2" "$tol" || fail "2-rank translate losses differ"
      # 3 ranks: the token budgets split by sentences, so data.batch_size (32, unused here) need not divide.
      mpi 3 "$train" "$@" --set train.max_steps=2 --run-dir "$work/t3" > "$work/t3.log" 2>&1 \
        || { cat "$work/t3.log"; fail "3-rank translate was refused or failed"; }
      matches "global batch data.max_tokens 300 padded tokens, split by sentences" "$(cat "$work/t3.log")" \
        || { cat "$work/t3.log"; fail "the log does not say how translation batches are split"; }
      python3 - "$work/t1/summary.json" "$work/t2/summary.json" <<'PY' || fail "2-rank final evaluation did not gather every sentence"
import json, sys
a, b = (json.load(open(p))["final"]["valid"] for p in sys.argv[1:])
assert a["sentences"] == b["sentences"] == 300 and a["pieces"] == b["pieces"], (a, b)
PY
      echo "ok: translate: 2 ranks follow 1 process, 3 ranks split the batches"
    else
      # A model that translates (600 steps, one process), taken one step further by 1 process and by 2
      # ranks: the same validation BLEU from the gathered translations, the same perplexity.
      "$train" "$@" --set train.max_steps=600 --set train.warmup_steps=100 --set train.lr=0.3 --set log.every_steps=100 \
        --set model.embedding_size=32 --set model.hidden_size=32 --set eval.max_len_a=1.5 --set eval.max_len_b=10 \
        --set train.threads=1 --run-dir "$work/long" > "$work/long.log" 2>&1 || { cat "$work/long.log"; fail "600-step translate failed"; }
      cp -r "$work/long" "$work/long1" && cp -r "$work/long" "$work/long2"
      "$train" --resume "$work/long1" --set train.max_steps=601 > "$work/l1.log" 2>&1 || { cat "$work/l1.log"; fail "1-process resume failed"; }
      mpi 2 "$train" --resume "$work/long2" --set train.max_steps=601 > "$work/l2.log" 2>&1 \
        || { cat "$work/l2.log"; fail "2-rank resume failed"; }
      python3 - "$work/long1/summary.json" "$work/long2/summary.json" <<'PY' || fail "translate evaluations differ"
import json, sys
a, b = (json.load(open(p))["final"]["valid"] for p in sys.argv[1:])
print("valid bleu", a["bleu"], b["bleu"], "ppl", a["ppl"], b["ppl"])
assert a["bleu"] > 2 and abs(a["bleu"] - b["bleu"]) < 1e-9 and a["sentences"] == b["sentences"] == 300
assert a["pieces"] == b["pieces"] and abs(a["ppl"] - b["ppl"]) <= 1e-5 * a["ppl"]
PY
      echo "ok: translate: 2 ranks give 1 process's BLEU and perplexity"
    fi
    ;;
  ema)
    # A moving average of the weights (train.ema_decay): every rank holds the same average (the
    # checkpoint writes compare the ranks' hashes of the average and the raw weights, and refuse when
    # they differ), and it equals one process's: losses, evaluations of the average, its tensors.
    set -- --set train.ema_decay=0.8 --set train.ema_start_step=2
    tiny_run "$@" --run-dir "$work/one" > "$work/one.log" 2>&1 || { cat "$work/one.log"; fail "1-process run failed"; }
    tiny_mpi "$@" --run-dir "$work/two" > "$work/two.log" 2>&1 || { cat "$work/two.log"; fail "2-rank run failed"; }
    same_losses "$work/one" "$work/two" "$tol" || fail "2-rank losses differ from the single process's"
    PYTHONPATH="$src/tests/e2e" python3 - "$work" "$tol" << 'PY' || fail "2-rank average differs from the single process's"
import json, sys
from st_read import read, floats
w, tol = sys.argv[1], float(sys.argv[2])
def rel(a, b): return abs(a - b) / max(1.0, abs(a))
one, two = (json.load(open(f"{w}/{r}/summary.json"))["final"]["valid"]["bpc"] for r in ("one", "two"))
print("valid bpc of the average: 1 process", one, "2 ranks", two)
assert rel(one, two) <= tol
a, b = read(f"{w}/one/last.safetensors")[0], read(f"{w}/two/last.safetensors")[0]
names = [k for k in a if k.startswith("raw.")] + [k[4:] for k in a if k.startswith("raw.")]
worst = max(rel(x, y) for k in names for x, y in zip(floats(a[k]), floats(b[k])))
print(f"{len(names)} tensors (averages and raw weights), largest difference {worst:.3g}")
assert names and worst <= tol
PY
    echo "ok: 2 ranks keep one process's moving average"
    ;;
  resume)
    # 12 steps in one process; the same as 6 steps on 2 ranks, 3 more on 1, the last 3 on 2 again (the
    # carried state of the 4 streams travels whole in the checkpoint; each rank takes its streams).
    tiny_run --run-dir "$work/full" > /dev/null || fail "uninterrupted run failed"
    tiny_mpi --run-dir "$work/part" --set train.max_steps=6 > "$work/a.log" 2>&1 || { cat "$work/a.log"; fail "2-rank part failed"; }
    "$train" --resume "$work/part" --set train.max_steps=9 > "$work/b.log" 2>&1 || { cat "$work/b.log"; fail "1-rank resume failed"; }
    mpi 2 "$train" --resume "$work/part" --set train.max_steps=12 > "$work/c.log" 2>&1 || { cat "$work/c.log"; fail "2-rank resume failed"; }
    same_losses "$work/full" "$work/part" "$tol" || fail "losses after 2 -> 1 -> 2 ranks differ from one run"
    [ "$(losses "$work/part" | wc -l)" -eq 12 ] || fail "expected 12 logged steps"
    echo "ok: resumed 2 -> 1 -> 2 ranks, losses follow the uninterrupted run"
    ;;
  kill)
    # SIGKILL one rank: mpirun must end (non-zero) in bounded time, naming it, and the last checkpoint
    # must still load.
    start_long_run --set eval.every_steps=20 --set eval.max_batches=1
    for _ in $(seq 200); do [ -f "$work/run/last.safetensors" ] && break; sleep 0.1; done
    [ -f "$work/run/last.safetensors" ] || { kill -9 "$mp"; fail "no checkpoint before the kill"; }
    pid=$(rank_pid "$mp" 1)
    [ -n "$pid" ] || { kill -9 "$mp"; fail "rank 1 not found"; }
    start=$(date +%s.%N)
    kill -9 "$pid"
    wait_bounded 60; rc=$?
    took=$(python3 -c "import time; print(round(time.time() - $start, 1))")
    tail -5 "$work/log"
    [ $rc -ne 0 ] || fail "mpirun exited 0 after a rank was killed"
    grep -q "rank 1" "$work/log" || fail "the message does not name rank 1"
    "$eval" --checkpoint "$work/run/last.safetensors" --split valid --max-batches 1 > /dev/null \
      || fail "last.safetensors does not load after the kill"
    echo "ok: a killed rank ended the job in $took s (exit $rc); last.safetensors loads"
    ;;
  hang)
    # SIGSTOP one rank (alive, silent): the others' collective times out (train.dist_timeout_s 3) and
    # rank 0 names the rank that never arrived (or arrived and fell silent), then ends the job.
    start_long_run --set eval.every_steps=100000 --set train.dist_timeout_s=3
    pid=$(rank_pid "$mp" 1)
    [ -n "$pid" ] || { kill -9 "$mp"; fail "rank 1 not found"; }
    start=$(date +%s.%N)
    kill -STOP "$pid"
    wait_bounded 60; rc=$?
    kill -CONT "$pid" 2> /dev/null
    took=$(python3 -c "import time; print(round(time.time() - $start, 1))")
    grep "error" "$work/log" | head -3
    [ $rc -ne 0 ] || fail "mpirun exited 0 with a stopped rank"
    # Stopped before the collective (it never arrived) or inside it (it arrived, then fell silent).
    grep -Eq "rank 0: error: '.*' \(collective #[0-9]+\) has waited [0-9]+ s .*(for rank\(s\) 1 \(last at #[0-9]+\), which have not reached it|: rank\(s\) 1 \(silent for [0-9]+ s\) reached it and then stopped responding)" \
      "$work/log" || fail "rank 0 did not name the stopped rank"
    echo "ok: a stopped rank was named and the job ended in $took s (exit $rc)"
    ;;
  interrupt)
    # SIGINT to rank 1 alone: its vote travels with the step's sums, both ranks stop after the same
    # step, rank 0 saves, both exit 130; the run resumes.
    start_long_run --set eval.every_steps=100000
    pid=$(rank_pid "$mp" 1)
    [ -n "$pid" ] || { kill -9 "$mp"; fail "rank 1 not found"; }
    kill -INT "$pid"
    wait_bounded 60; rc=$?
    [ $rc -eq 130 ] || { cat "$work/log"; fail "expected exit 130 after Ctrl-C on rank 1, got $rc"; }
    grep -q "interrupted at step" "$work/log" || fail "no interruption message"
    [ -f "$work/run/last.safetensors" ] || fail "no checkpoint after Ctrl-C"
    step=$("$eval" --checkpoint "$work/run/last.safetensors" --split valid --max-batches 1 --json "$work/e.json" > /dev/null && \
           grep '"step"' "$work/e.json" | tr -dc 0-9)
    mpi 2 "$train" --resume "$work/run" --set train.max_steps=$((step + 2)) > "$work/r.log" 2>&1 \
      || { cat "$work/r.log"; fail "2-rank resume after Ctrl-C failed"; }
    echo "ok: Ctrl-C on rank 1 stopped both ranks at step $step with a checkpoint; resumed"
    ;;
  refuse)
    out=$(tiny_mpi --set data.batch_size=5 --run-dir "$work/r" 2>&1); rc=$?
    echo "$out" | tail -3
    [ $rc -ne 0 ] || fail "a batch of 5 on 2 ranks was accepted"
    matches "srutrain: error: data.batch_size 5 is the global batch, and it does not divide among the 2 processes: use a multiple of 2" "$out" \
      || fail "no clear message"
    [ "$(grep -c "does not divide" <<< "$out")" -eq 1 ] || fail "the message should come once (from rank 0)"
    [ ! -e "$work/r" ] || fail "a refused run created its directory"
    echo "ok: refused, once, before anything was written"
    ;;
  device_info)
    out=$(mpi 2 "$train" --device-info 2>&1) || { echo "$out"; fail "--device-info failed"; }
    echo "$out"
    matches "World: 2 processes, backend mpi" "$out" || fail "no world size and backend"
    matches "rank 0: cpu on .*\(local rank 0 of 2\)" "$out" && matches "rank 1: cpu on .*\(local rank 1 of 2\)" "$out" \
      || fail "no per-rank devices"
    ;;
  bench)
    mpi 2 "$build/srubench" --threads 1 --warm-up-seconds 0 train-epoch --config "$tiny" --set data.path="$data" \
      --steps 2 --warmup-steps 1 --repeats 1 --json "$work/b.json" > "$work/b.log" 2>&1 || { cat "$work/b.log"; fail "srubench under mpirun failed"; }
    python3 -c "import json, sys; r = json.load(open('$work/b.json'))['rows'][0]; print(r); sys.exit(0 if r['ranks'] == 2 else 1)" \
      || fail "srubench did not run on 2 ranks"
    [ "$(grep -c "s_per_epoch" "$work/b.log")" -eq 1 ] || fail "the table should be printed once (rank 0)"
    ;;
  *) fail "unknown case $case" ;;
esac
echo "PASS: $case"
