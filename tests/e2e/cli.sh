#!/usr/bin/env bash
# End-to-end checks of srutrain / srueval on tiny runs: bad input gives a clear message and a
# non-zero exit without damaging saved files; resume continues bit for bit; Ctrl-C saves and exits;
# srueval reproduces the training run's numbers. Usage: cli.sh BUILD_DIR SOURCE_DIR CASE
set -uo pipefail
build=$1 src=$2 case=$3
source "$src/tests/e2e/common.sh"
# expect_error REGEX CMD...: CMD must exit non-zero and print REGEX (stdout or stderr).
expect_error() {
  local regex=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  echo "$out" | tail -3
  [ $rc -ne 0 ] || fail "expected a non-zero exit from: $*"
  matches "$regex" "$out" || fail "expected /$regex/ in the output of: $*"
  echo "ok: exit $rc, message matches /$regex/"
}
tiny_run() { "$train" --config "$tiny" --set data.path="$data" "$@"; }
# A word-for-word "translation" of generated sentences in $work/{train,valid,test}.{en,de}, and the
# settings that train a small translation model on them.
word_for_word_pairs() {
  python3 - "$work" <<'PY'
import random, sys
random.seed(1)
words = "the a man dog runs sits on red big park".split()
for name, n in (("train", 1500), ("valid", 60), ("test", 60)):
    with open(f"{sys.argv[1]}/{name}.en", "w") as en, open(f"{sys.argv[1]}/{name}.de", "w") as de:
        for _ in range(n):
            s = [random.choice(words) for _ in range(random.randint(2, 6))]
            en.write(" ".join(s) + "\n")
            de.write(" ".join("de" + w[::-1] for w in s) + "\n")
PY
}
tiny_translation=(--set data.path="$work/train.en" --set data.target_path="$work/train.de"
  --set data.valid_source="$work/valid.en" --set data.valid_target="$work/valid.de" --set data.test_source="$work/test.en"
  --set data.test_target="$work/test.de" --set data.vocab_size=40 --set data.max_tokens=200
  --set model.embedding_size=32 --set model.hidden_size=32 --set model.ff_size=64 --set model.num_layers=2
  --set model.dropout=0.1 --set train.schedule=constant --set train.lr=0.005)

case $case in
  bad_config)
    expect_error "File does not exist" "$train" --config "$work/none.yaml"
    expect_error "malformed.yaml:[0-9]+:[0-9]+: malformed YAML" "$train" --config "$src/tests/data/malformed.yaml"
    expect_error "unknown_key.yaml:4: unknown key 'model.hidden_sise' \(did you mean 'model.hidden_size'\?\)" \
      "$train" --config "$src/tests/data/unknown_key.yaml"
    expect_error "wrong_type.yaml:4: train.lr: expected a number, got 'fast'" "$train" --config "$src/tests/data/wrong_type.yaml"
    expect_error "negative.yaml:4: model.num_layers: -2 is out of range: must be >= 1" "$train" --config "$src/tests/data/negative.yaml"
    expect_error "no config given" "$train"
    # Names come from the registries; keys must belong to the chosen task and encoder.
    expect_error "task: 'charlmm' is not one of: charlm, wordlm, classify[a-z_, +-]* \(did you mean 'charlm'\?\)" \
      "$train" --config "$tiny" --set task=charlmm
    sed 's/type: sru/type: gru/' "$tiny" > "$work/gru.yaml"
    expect_error "gru.yaml:[0-9]+: model.type: 'gru' is not one of: sru, lstm\b" "$train" --config "$work/gru.yaml"
    expect_error "model.type: 'gru' is not one of: sru, lstm\b" "$train" --config "$tiny" --set model.type=gru
    expect_error "--set data.folds=3: data.folds does not apply here: it is a key of task classify" \
      "$train" --config "$tiny" --set data.folds=3
    expect_error "--set model.rescale=true: model.rescale does not apply here: it is a key of encoder sru" \
      "$train" --config "$tiny" --set model.type=lstm --set model.rescale=true
    expect_error "train.cuda_graphs: 'always' is not one of: auto, on, off" "$train" --config "$tiny" --set train.cuda_graphs=always
    ;;
  bad_data)
    expect_error "cannot open data file '$work/missing.txt' \(data.path\)" tiny_run --set data.path="$work/missing.txt" --run-dir "$work/r1"
    expect_error "cannot fill 4 streams" tiny_run --set data.path="$src/tests/data/empty.txt" --run-dir "$work/r2"
    expect_error "cannot create run directory '/proc/srutrain-test/run'" tiny_run --run-dir /proc/srutrain-test/run
    # CUDA graphs on, where none can be captured (the CPU): refused by name, not trained eagerly.
    expect_error "train.cuda_graphs: on, but the model is on cpu" tiny_run --set train.cuda_graphs=on --run-dir "$work/r3"
    ;;
  cuda_unavailable)  # on machines without a usable GPU: train.device=cuda is refused, auto falls back to the CPU
    if ! matches "no usable CUDA device|CUDA: not built" "$("$train" --device-info)"; then
      echo "SKIPPED: a CUDA device is usable here"; exit 77
    fi
    expect_error "train.device: 'cuda' is not available" tiny_run --set train.device=cuda --run-dir "$work/r1"
    [ ! -e "$work/r1/last.safetensors" ] || fail "a refused run wrote a checkpoint"
    tiny_run --set train.device=auto --set train.max_steps=2 --run-dir "$work/r2" > "$work/auto.log" 2>&1 \
      || fail "train.device=auto did not fall back to the CPU: $(tail -3 "$work/auto.log")"
    grep -q '"device": "cpu"' "$work/r2/summary.json" || fail "summary.json does not say device cpu"
    ;;
  cuda_train)  # on a GPU: the tiny run trains on cuda:0 and follows the CPU run's losses
    if matches "no usable CUDA device|CUDA: not built" "$("$train" --device-info)"; then
      echo "SKIPPED: no usable CUDA device"; exit 77
    fi
    for model in sru lstm; do  # the LSTM runs through cuDNN on the GPU
      tiny_run --set model.type=$model --run-dir "$work/cpu-$model" > "$work/cpu.log" 2>&1 \
        || fail "CPU $model run failed: $(tail -3 "$work/cpu.log")"
      tiny_run --set model.type=$model --set train.device=cuda --run-dir "$work/gpu-$model" > "$work/gpu.log" 2>&1 \
        || fail "CUDA $model run failed: $(tail -5 "$work/gpu.log")"
      grep -q '"device": "cuda:0"' "$work/gpu-$model/summary.json" || fail "summary.json does not say device cuda:0"
      # Same initial weights, data and dropout masks: the losses agree up to float rounding.
      python3 - "$work/cpu-$model/metrics.jsonl" "$work/gpu-$model/metrics.jsonl" <<'PY' || fail "CUDA $model losses differ from the CPU run's"
import json, sys
def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if "loss" in r and "split" not in r]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
print("cpu", a, "\ncuda", b)
sys.exit(0 if len(a) == len(b) > 0 and all(abs(x - y) <= 1e-3 * max(1.0, abs(x)) for x, y in zip(a, b)) else 1)
PY
      # The checkpoint is an ordinary file: srueval on the CPU evaluates what the GPU trained.
      "$eval" --checkpoint "$work/gpu-$model/last.safetensors" --split valid > "$work/eval.txt" || fail "srueval failed"
    done
    echo "ok: CUDA training follows the CPU run (SRU and LSTM)"
    ;;
  resume_errors)
    mkdir -p "$work/empty"
    expect_error "$work/empty/config.yaml does not exist, so this is not a srutrain run directory" \
      "$train" --resume "$work/empty"
    mkdir -p "$work/started" && cp "$tiny" "$work/started/config.yaml"
    expect_error "there is no checkpoint to resume from \($work/started/last.safetensors does not exist\)" \
      "$train" --resume "$work/started" --set data.path="$data"
    tiny_run --run-dir "$work/run" --set train.max_steps=2 > /dev/null || fail "tiny run failed"
    expect_error "already holds a checkpoint: continue it with --resume" tiny_run --run-dir "$work/run"
    ;;
  resume_bit_identical)
    for model in sru lstm; do
      tiny_run --run-dir "$work/full-$model" --set model.type=$model > /dev/null || fail "uninterrupted run failed"
      tiny_run --run-dir "$work/part-$model" --set model.type=$model --set train.max_steps=6 > /dev/null || fail "first half failed"
      "$train" --resume "$work/part-$model" --set train.max_steps=12 > /dev/null || fail "resume failed"
      diff <(losses "$work/full-$model") <(losses "$work/part-$model") || fail "$model: losses after resume differ"
      [ "$(losses "$work/full-$model" | wc -l)" -eq 12 ] || fail "expected 12 logged steps"
      echo "ok: $model losses of steps 1-12 identical with and without a stop/resume at step 6"
    done
    ;;
  accumulate)
    # train.accumulate 2 (with label smoothing): a step is one update over two batches; a run stopped
    # after step 6 and resumed gives the uninterrupted run's losses and evaluations bit for bit.
    opts=(--set train.accumulate=2 --set train.label_smoothing=0.1)
    tiny_run --run-dir "$work/full" "${opts[@]}" > "$work/full.log" 2>&1 || { tail -3 "$work/full.log"; fail "uninterrupted run failed"; }
    tiny_run --run-dir "$work/part" "${opts[@]}" --set train.max_steps=6 > /dev/null 2>&1 || fail "first half failed"
    "$train" --resume "$work/part" --set train.max_steps=12 > "$work/resume.log" 2>&1 || fail "resume failed"
    diff <(losses "$work/full") <(losses "$work/part") || fail "losses after resume differ"
    diff <(grep '"eval"' "$work/full/metrics.jsonl") <(grep '"eval"' "$work/part/metrics.jsonl") \
      || fail "evaluations after resume differ"
    [ "$(losses "$work/full" | wc -l)" -eq 12 ] || fail "expected 12 logged steps (updates)"
    grep -Eq "steps per epoch \([0-9]+ batches, 2 per step\), 12 steps in all" "$work/full.log" \
      || fail "the log does not say how many batches a step takes"
    grep -q "resuming $work/part at step 6 (epoch 1, 12 of [0-9]* batches done)" "$work/resume.log" \
      || fail "the checkpoint of step 6 is not at batch 12: $(grep resuming "$work/resume.log")"
    echo "ok: accumulate 2: losses and evaluations of steps 1-12 identical with and without a stop/resume at step 6"
    # srubench train-epoch groups the batches as srutrain does: --steps counts updates.
    "$build/srubench" --warm-up-seconds 0 train-epoch --config "$tiny" --set data.path="$data" "${opts[@]}" --steps 2 \
      --warmup-steps 1 --repeats 1 --json "$work/bench.json" > /dev/null || fail "srubench train-epoch failed"
    python3 - "$work/bench.json" "$work/full.log" <<'PY' || fail "srubench train-epoch did not take updates of two batches"
import json, re, sys
row = json.load(open(sys.argv[1]))["rows"][0]
per_epoch = int(re.search(r"(\d+) steps per epoch", open(sys.argv[2]).read()).group(1))
print(row)
sys.exit(0 if row["steps_taken"] == 3 and row["steps_per_epoch"] == per_epoch else 1)
PY
    echo "ok: srubench train-epoch took srutrain's steps of two batches"
    ;;
  nonfinite)
    tiny_run --run-dir "$work/run" --set train.max_steps=4 > /dev/null || fail "good run failed"
    before=$(sha256sum "$work/run/last.safetensors")
    expect_error "non-finite (loss|gradient norm) at step" "$train" --resume "$work/run" --set train.max_steps=40 \
      --set train.lr=1e30 --set eval.every_steps=100
    [ "$(sha256sum "$work/run/last.safetensors")" = "$before" ] || fail "last.safetensors changed"
    echo "ok: last.safetensors untouched"
    # skip: the run goes on, skipping (and counting) the bad updates.
    "$train" --resume "$work/run" --set train.max_steps=8 --set train.lr=1e30 --set eval.every_steps=100 \
      --set train.on_nonfinite=skip > "$work/skip.log" 2>&1 || { cat "$work/skip.log"; fail "skip mode failed"; }
    grep -q "update skipped" "$work/skip.log" || fail "no skipped update reported"
    grep -Eq '"skipped_steps": [1-9]' "$work/run/summary.json" || fail "summary.json does not count skipped steps"
    echo "ok: on_nonfinite=skip skipped $(grep -c 'update skipped' "$work/skip.log") updates and finished"
    ;;
  launch_ahead)
    records() {
      python3 -c 'import json, sys
for line in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(line)
    print({k: v for k, v in r.items() if k not in ("ms_per_step", "tokens_per_s", "kernels_per_step", "memory_mb", "peak_memory_mb")})' "$1"
    }
    # srutrain's loop launching replayed steps ahead (train.launch_ahead), on the CPU through the twin
    # of a CUDA graph (SRU_REPLAY_ON_HOST=1): every logged loss, evaluation and the last checkpoint are
    # those of the same run read step by step and of the eager run. With lr 1e30 every step is
    # non-finite and skipped, the carried state reset each time, so nothing replays: the loop's handling
    # of skipped outcomes. (A step launched behind a non-finite one, taken back: tests/unit/test_launch_ahead.cpp.)
    opts=(--set train.max_steps=40 --set log.every_steps=8 --set eval.every_steps=20 --set train.cuda_graphs=auto)
    for lr in 0.003 1e30; do
      more=(--set "train.lr=$lr" --set train.on_nonfinite=skip)
      SRU_REPLAY_ON_HOST=1 tiny_run --run-dir "$work/ahead-$lr" "${opts[@]}" "${more[@]}" > "$work/ahead-$lr.log" 2>&1 \
        || { tail -5 "$work/ahead-$lr.log"; fail "launched ahead ($lr) failed"; }
      grep -q "launched ahead: yes" "$work/ahead-$lr.log" || fail "the twin's run did not launch ahead"
      SRU_REPLAY_ON_HOST=1 tiny_run --run-dir "$work/read-$lr" "${opts[@]}" "${more[@]}" --set train.launch_ahead=off \
        > /dev/null 2>&1 || fail "read step by step ($lr) failed"
      tiny_run --run-dir "$work/eager-$lr" "${opts[@]}" "${more[@]}" > /dev/null 2>&1 || fail "eager ($lr) failed"
      for other in read eager; do
        # Every record but its timings, memory and kernel counts (the twin's graphs add the gate's).
        diff <(records "$work/ahead-$lr") <(records "$work/$other-$lr") || fail "$lr: metrics differ from the $other run's"
        # Every tensor (weights, optimiser state, carried state) to the bit; the metadata holds the config.
        PYTHONPATH="$src/tests/e2e" python3 -c 'import sys; from st_read import read
a, b = (read(p)[0] for p in sys.argv[1:]); sys.exit(0 if a == b and a else 1)' \
          "$work/ahead-$lr/last.safetensors" "$work/$other-$lr/last.safetensors" \
          || fail "$lr: last.safetensors' tensors differ from the $other run's"
      done
    done
    python3 -c 'import json, sys; n = json.load(open(sys.argv[1]))["steps_launched_ahead"]; print(n, "steps launched ahead")
sys.exit(0 if n >= 20 else 1)' "$work/ahead-0.003/summary.json" || fail "too few steps stayed launched"
    skipped=$(grep -c '"event":"skipped"' "$work/ahead-1e30/metrics.jsonl")
    [ "$skipped" -gt 0 ] || fail "lr 1e30 skipped no step"
    echo "ok: launched ahead = read step by step = eager (losses, evaluations, checkpoint), also with $skipped steps skipped"
    ;;
  interrupt)
    # Started directly (not through a shell function), so that $! is srutrain itself.
    "$train" --config "$tiny" --set data.path="$data" --run-dir "$work/run" --set train.max_steps=100000 \
      --set eval.every_steps=100000 > "$work/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do [ -s "$work/run/metrics.jsonl" ] && break; sleep 0.1; done
    sleep 0.5
    kill -INT $pid
    wait $pid; rc=$?
    [ $rc -eq 130 ] || { cat "$work/log"; fail "expected exit status 130 after Ctrl-C, got $rc"; }
    grep -q "interrupted at step" "$work/log" || fail "no interruption message"
    [ -f "$work/run/last.safetensors" ] || fail "no checkpoint after Ctrl-C"
    step=$("$eval" --checkpoint "$work/run/last.safetensors" --split valid --max-batches 1 --json "$work/e.json" > /dev/null && \
           grep '"step"' "$work/e.json" | tr -dc 0-9)
    "$train" --resume "$work/run" --set train.max_steps=$((step + 2)) > /dev/null || fail "resume after Ctrl-C failed"
    echo "ok: Ctrl-C at step $step saved a checkpoint; resumed to step $((step + 2))"
    ;;
  eval)
    tiny_run --run-dir "$work/run" > /dev/null || fail "run failed"
    "$eval" --checkpoint "$work/run/best.safetensors" --split valid --json "$work/valid.json" || fail "srueval failed"
    python3 - "$work/run/summary.json" "$work/valid.json" <<'PY' || fail "srueval's valid BPC differs from the run's"
import json, sys
summary, ev = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
a, b = summary["best"]["valid"]["bpc"], ev["metrics"]["bpc"]
print("run best valid bpc", a, "srueval", b)
sys.exit(0 if a == b else 1)
PY
    # Any file: one stream from a zero state; the chunk size does not change the result.
    head -c 3000 "$data" > "$work/t.txt"
    a=$("$eval" --checkpoint "$work/run/last.safetensors" --text "$work/t.txt" --chunk 7 | sed 's/.*bpc \([^ ]*\).*/\1/')
    b=$("$eval" --checkpoint "$work/run/last.safetensors" --text "$work/t.txt" --chunk 500 | sed 's/.*bpc \([^ ]*\).*/\1/')
    python3 -c "import sys; a, b = float('$a'), float('$b'); print('chunk 7:', a, 'chunk 500:', b); sys.exit(0 if abs(a - b) < 1e-4 else 1)" \
      || fail "--text BPC depends on the chunk size"
    matches "^The " "$("$eval" --checkpoint "$work/run/last.safetensors" --text "$work/t.txt" --generate 40 --prompt "The ")" \
      || fail "no sample"
    # The search layer's ways to generate: beam search prints its n-best, greedy and beam 1 agree,
    # sampling options apply, and contradictory options are refused.
    out=$("$eval" --checkpoint "$work/run/last.safetensors" --text "$work/t.txt" --generate 12 --prompt "The " \
          --beam 3 --n-best 2 --length-penalty 0.6) || fail "beam search failed"
    matches "beam 3 \(1 of 2\)" "$out" && matches "beam 3 \(2 of 2\)" "$out" || fail "no n-best output: $out"
    greedy=$("$eval" --checkpoint "$work/run/last.safetensors" --text "$work/t.txt" --generate 12 --prompt "The " --greedy \
             | sed -n '/^greedy:/{n;p}')
    beam1=$("$eval" --checkpoint "$work/run/last.safetensors" --text "$work/t.txt" --generate 12 --prompt "The " --beam 1 \
            | sed -n '/^beam 1:/{n;p}')
    [ -n "$greedy" ] && [ "$greedy" = "$beam1" ] || fail "greedy '$greedy' and beam 1 '$beam1' differ"
    matches "sample \(temperature 0.7, top-k 5, top-p 0.9\) 3:" "$("$eval" --checkpoint "$work/run/last.safetensors" \
      --text "$work/t.txt" --generate 8 --temperature 0.7 --top-k 5 --top-p 0.9 --samples 3)" || fail "no third sample"
    expect_error "--greedy and --beam: choose one" "$eval" --checkpoint "$work/run/last.safetensors" --text "$work/t.txt" \
      --generate 5 --greedy --beam 2
    expect_error "n_best" "$eval" --checkpoint "$work/run/last.safetensors" --text "$work/t.txt" --generate 5 --beam 2 --n-best 3
    # Checkpoint problems.
    expect_error "does not match the model" "$eval" --checkpoint "$work/run/last.safetensors" --set model.hidden_size=48
    head -c 1000 "$work/run/last.safetensors" > "$work/cut.safetensors"
    expect_error "truncated" "$eval" --checkpoint "$work/cut.safetensors"
    printf 'garbage' > "$work/junk.safetensors"
    expect_error "not a safetensors file" "$eval" --checkpoint "$work/junk.safetensors"
    expect_error "cannot open checkpoint" "$eval" --checkpoint "$work/none.safetensors"
    # What the task lacks is refused naming the task; so is a split it does not have.
    expect_error "--predict: task charlm cannot predict" "$eval" --checkpoint "$work/run/last.safetensors" \
      --predict "$work/t.txt"
    expect_error "task charlm has no split 'dev' \(its splits: train, valid, test\)" "$eval" \
      --checkpoint "$work/run/last.safetensors" --split dev
    # Messages name files and keys, not our source files (those appear with --debug only).
    out=$("$eval" --checkpoint "$work/run/last.safetensors" --split dev 2>&1)
    ! matches "\.cpp:[0-9]+" "$out" || fail "the message names a source file: $out"
    matches "\(at src/tasks/task\.cpp:[0-9]+\)" "$("$eval" --debug --checkpoint "$work/run/last.safetensors" --split dev 2>&1)" \
      || fail "--debug does not add the source location"
    ;;
  early_stop)
    # With a learning rate far below float32's resolution of the weights nothing changes, so the
    # validation BPC never improves after the first evaluation: with patience 1 the run must stop at
    # the second evaluation (step 4) instead of running to step 12.
    tiny_run --run-dir "$work/run" --set train.lr=1e-15 --set train.early_stop_patience=1 --set eval.every_steps=2 \
      > /dev/null || fail "run failed"
    grep -q '"stopped": "early stop"' "$work/run/summary.json" || fail "summary.json does not say early stop"
    grep -q '"steps": 4,' "$work/run/summary.json" || fail "did not stop at step 4"
    echo "ok: stopped early at step 4"
    ;;
  translate)
    # A word-for-word "translation" of generated sentences: srutrain trains (a SentencePiece model of its
    # own), srueval evaluates the test split, translates a file and standard input (beam, greedy,
    # n-best) and scores it with bleu-score; bad parallel data, bad input to translate and a checkpoint
    # of another task are refused by name.
    word_for_word_pairs
    cfg=(--config "$src/configs/translate/multi30k-sru-4.yaml" "${tiny_translation[@]}" --set train.epochs=8
         --set eval.every_steps=0 --set log.every_steps=20 --set train.threads=2 --set train.accumulate=2)
    "$train" "${cfg[@]}" --run-dir "$work/run" > "$work/train.log" 2>&1 || { tail "$work/train.log"; fail "training failed"; }
    grep -q "final: valid bleu" "$work/train.log" || fail "no final BLEU line"
    "$eval" --checkpoint "$work/run/best.safetensors" --split test --json "$work/test.json" > /dev/null \
      || fail "srueval on the test split failed"
    python3 - "$work/test.json" <<'PY' || fail "the model did not learn the word mapping"
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
print("test BLEU", m["bleu"], "ppl", m["ppl"])
sys.exit(0 if m["bleu"] > 20 and m["ppl"] < 4 else 1)
PY
    "$eval" --checkpoint "$work/run/best.safetensors" --predict "$work/test.en" > "$work/test.hyp" 2> "$work/predict.log" \
      || fail "--predict failed"
    [ "$(wc -l < "$work/test.hyp")" = 60 ] || fail "--predict did not write one line per source"
    grep -q "sentences/s" "$work/predict.log" || fail "no translation speed"
    # --translate reads standard input too, and gives the same beam translations as --predict; n-best
    # writes that many lines per sentence, the best first.
    "$eval" --checkpoint "$work/run/best.safetensors" --translate - < "$work/test.en" > "$work/stdin.hyp" \
      2> "$work/translate.log" || fail "--translate - failed"
    cmp -s "$work/test.hyp" "$work/stdin.hyp" || fail "--translate - differs from --predict"
    grep -q "target tokens/s (beam 5, length penalty 0.6)" "$work/translate.log" || fail "no --translate speed line"
    head -n 3 "$work/test.en" | "$eval" --checkpoint "$work/run/best.safetensors" --translate - --beam 4 --n-best 3 \
      > "$work/nbest.hyp" 2> /dev/null || fail "--translate --n-best failed"
    [ "$(wc -l < "$work/nbest.hyp")" = 9 ] || fail "--n-best 3 did not write 3 lines per sentence"
    [ "$(sed -n 4p "$work/nbest.hyp")" = "$(sed -n 2p "$work/test.hyp")" ] || fail "n-best's first is not the best"
    "$eval" --checkpoint "$work/run/best.safetensors" --translate "$work/test.en" --greedy > "$work/greedy.hyp" \
      2> /dev/null || fail "--translate --greedy failed"
    [ "$(wc -l < "$work/greedy.hyp")" = 60 ] || fail "--translate --greedy did not write one line per source"
    expect_error "n-best 6 exceeds the beam size 5" "$eval" --checkpoint "$work/run/best.safetensors" \
      --translate "$work/test.en" --n-best 6
    printf 'a man\nthe \xc3 dog\n' > "$work/bad_input.en"
    expect_error "bad_input.en.:2: invalid UTF-8" "$eval" --checkpoint "$work/run/best.safetensors" \
      --translate "$work/bad_input.en"
    "$eval" bleu-score --hyp "$work/test.hyp" --ref "$work/test.de" > "$work/bleu.json" || fail "bleu-score failed"
    grep -q '"signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"' "$work/bleu.json" \
      || fail "no sacreBLEU signature"
    head -n 10 "$work/test.de" > "$work/short.de"
    expect_error "has 10 lines but .*test.hyp' has 60|test.hyp.*60.*short.de.*10" "$eval" bleu-score \
      --hyp "$work/test.hyp" --ref "$work/short.de"
    expect_error "short.de" "$train" "${cfg[@]}" --set data.valid_target="$work/short.de" --run-dir "$work/bad"
    printf 'ok\n\xff\xfe broken\n' > "$work/bad.en"
    printf 'ok\nfine\n' > "$work/bad.de"
    expect_error "bad.en.:2: invalid UTF-8" "$train" "${cfg[@]}" --set data.valid_source="$work/bad.en" \
      --set data.valid_target="$work/bad.de" --run-dir "$work/bad2"
    tiny_run --run-dir "$work/lm" --set train.max_steps=2 > /dev/null || fail "char-LM run failed"
    expect_error "--predict: task charlm cannot predict" "$eval" --checkpoint "$work/lm/last.safetensors" \
      --predict "$work/test.en"
    expect_error "--translate: task charlm cannot translate" "$eval" --checkpoint "$work/lm/last.safetensors" \
      --translate "$work/test.en"
    echo "ok: translate trained, evaluated, translated and scored"
    ;;
  squad)
    # A tiny reader trained on the shipped sample; srueval's answers score the same with the official
    # metric (squad-score), new questions are answered, and what the task cannot do is refused.
    sample=$src/data/squad-sample/dev-v1.1.sample.json
    for model in sru lstm; do
      "$train" --config "$src/tests/data/squad_tiny.yaml" --set data.path="$sample" --set data.valid_path="$sample" \
        --set model.type=$model --run-dir "$work/$model" > "$work/train.log" 2>&1 || { tail -5 "$work/train.log"; fail "$model run failed"; }
      grep -q '"f1"' "$work/$model/summary.json" || fail "summary.json has no f1"
    done
    out=$("$eval" --checkpoint "$work/sru/best.safetensors" --predictions "$work/preds.json") || fail "srueval --predictions failed"
    echo "$out"
    scored=$("$eval" squad-score --data "$sample" --predictions "$work/preds.json") || fail "squad-score failed"
    echo "$scored"
    python3 - "$out" "$scored" "$work/preds.json" <<'PY' || fail "squad-score disagrees with srueval"
import json, re, sys
em = float(re.search(r"exact_match ([0-9.e+-]+)", sys.argv[1]).group(1))
f1 = float(re.search(r"f1 ([0-9.e+-]+)", sys.argv[1]).group(1))
s = json.loads(sys.argv[2])
preds = json.load(open(sys.argv[3]))
print("srueval", em, f1, "squad-score", s, len(preds), "answers")
sys.exit(0 if abs(s["exact_match"] - em) < 1e-3 and abs(s["f1"] - f1) < 1e-3 and len(preds) == 336 else 1)
PY
    printf '[{"id": "a", "context": "The Yuan dynasty was founded by Kublai Khan in 1271.", "question": "Who founded the Yuan dynasty?"}]' > "$work/ask.json"
    answer=$("$eval" --checkpoint "$work/sru/best.safetensors" --predict "$work/ask.json") || fail "--predict failed"
    echo "$answer"
    python3 -c "import json, sys; a = json.loads(sys.argv[1])['a']; sys.exit(0 if a and a in 'The Yuan dynasty was founded by Kublai Khan in 1271.' else 1)" "$answer" \
      || fail "--predict did not answer with a span of the context"
    echo '["not", "an", "object"]' > "$work/bad.json"
    expect_error "predictions file .*bad.json. must be a JSON object" "$eval" squad-score --data "$sample" --predictions "$work/bad.json"
    expect_error "--generate: task squad cannot generate text" "$eval" --checkpoint "$work/sru/best.safetensors" --generate 5
    echo "ok: squad end to end"
    ;;
  bench_schedule)
    # srubench train-epoch takes srutrain's steps, learning-rate schedule included: after 1 warm-up step
    # and 2 repeats of 2 timed steps (5 steps), the step schedule (x0.5 every step) is at 0.003 * 0.5^4.
    "$build/srubench" --warm-up-seconds 0 train-epoch --config "$tiny" --set data.path="$data" \
      --set train.schedule=step --set train.decay_steps=1 --set train.decay_rate=0.5 --steps 2 --warmup-steps 1 \
      --repeats 2 --json "$work/bench.json" > /dev/null || fail "srubench train-epoch failed"
    python3 - "$work/bench.json" <<'PY' || fail "srubench did not follow the schedule"
import json, sys
row = json.load(open(sys.argv[1]))["rows"][0]
print(row)
sys.exit(0 if row["steps_taken"] == 5 and abs(row["lr_last"] - 0.003 * 0.5 ** 4) < 1e-12 else 1)
PY
    echo "ok: srubench train-epoch followed the step schedule"
    ;;
  configs)
    for c in "$src"/configs/*.yaml "$src"/configs/*/*.yaml; do
      "$train" --config "$c" --print-config > /dev/null || fail "$c does not parse"
      echo "ok: $c"
    done
    ;;
  kernel_counts)
    # Kernel dispatches per training step (core/kernel_count.h: SRU_KERNEL calls and tensor fills, copies
    # and conversions, the same count on the CPU and a GPU): srubench train-epoch's kernels_per_step for
    # the paper's char-LM configs and the WMT Transformer at tiny sizes (the count depends on the layers,
    # not their widths) must not exceed the counts of 2026-11-28's end (the multi-tensor update, in-place
    # gradients, dropout drawn in its kernel, no fill for unused gradients, accumulation's mean in the
    # update, attention without head copies, the Linear's bias in the GEMM, concat in one dispatch;
    # since 2026-11-28 evening a product's input gradient folded into the one waiting for it: 71 -> 63
    # and 5,449 -> 5,124, and into the accumulated .grad of later micro-batches: 5,124 -> 4,740; since
    # 2026-11-29 the SRU's dropout mask on c drawn by the recurrence's kernels: 63 -> 56, and the
    # Linear's weight and bias gradients in one dispatch: 56 -> 55, 52 -> 51, 4,740 -> 4,255, and the
    # feed-forward's ReLU in the first Linear's bias pass (linear_relu): 4,255 -> 4,195, 710 a step of
    # one batch; 229, 131 and 8,363 on 2026-11-27, issue 38's starting point); srutrain's metrics.jsonl
    # records srubench's number for every logged step.
    python3 "$src/scripts/reproduce/make_data.py" parallel "$work/pairs" > /dev/null
    tiny_sizes=(--set model.hidden_size=16 --set model.embedding_size=16 --set data.batch_size=4 --set data.bptt=8)
    pairs=(--set data.path="$work/pairs/train.en" --set data.target_path="$work/pairs/train.de"
           --set data.valid_source="$work/pairs/valid.en" --set data.valid_target="$work/pairs/valid.de"
           --set data.test_source= --set data.test_target= --set data.vocab_size=100 --set data.max_tokens=300
           --set model.embedding_size=16 --set model.hidden_size=16 --set model.ff_size=32)
    count() {  # CONFIG BASELINE ARGS...: kernels_per_step of srubench train-epoch, at most BASELINE
      local config=$1 baseline=$2; shift 2
      "$build/srubench" --warm-up-seconds 0 --threads 1 train-epoch --config="$src/configs/$config" "$@" --steps 3 \
        --warmup-steps 1 --repeats 1 --json "$work/count.json" > "$work/count.log" 2>&1 \
        || { cat "$work/count.log"; fail "srubench train-epoch $config"; }
      python3 - "$work/count.json" "$config" "$baseline" <<'PY' || fail "$config dispatches more kernels per step than before"
import json, sys
row = json.load(open(sys.argv[1]))["rows"][0]
n = row["kernels_per_step"]
print(f"{sys.argv[2]}: {n:g} kernels per step (at most {sys.argv[3]}); ms per step {row['ms_per_step']:.2f}, "
      f"host {row['host_ms_per_step']:.2f}, waiting {row['wait_ms_per_step']:.2f}")
# On the CPU nothing waits for a device: the host's share is the whole step.
assert row["wait_ms_per_step"] == 0 and row["host_ms_per_step"] == row["ms_per_step"] > 0, row
sys.exit(0 if n <= float(sys.argv[3]) else 1)
PY
    }
    count enwik8-lstm.yaml 51 --set data.path="$data" "${tiny_sizes[@]}"
    count translate/wmt-base.yaml 4195 "${pairs[@]}"  # its train.accumulate 5: five batches a step
    count translate/wmt-base.yaml 710 "${pairs[@]}" --set train.accumulate=1  # issue 38's goal row (<= 400 replayed)
    # At bf16 (the card's setting) the steps add the activations' casts (docs/results.md: 174 and 2,715
    # since each flat buffer's weights are converted once a step, 2026-11-29 night).
    count translate/wmt-base.yaml 2715 "${pairs[@]}" --set train.accumulate=1 --set train.precision=bf16
    count enwik8.yaml 174 --set data.path="$data" "${tiny_sizes[@]}" --set train.precision=bf16
    count enwik8.yaml 55 --set data.path="$data" "${tiny_sizes[@]}"  # last: its count.json is read below
    "$train" --config "$src/configs/enwik8.yaml" --set data.path="$data" "${tiny_sizes[@]}" --set train.max_steps=4 \
      --set log.every_steps=1 --set eval.every_steps=2 --set eval.max_batches=1 --set train.threads=1 \
      --run-dir "$work/run" > "$work/run.log" 2>&1 || { cat "$work/run.log"; fail "training"; }
    python3 - "$work/run/metrics.jsonl" "$work/count.json" <<'PY' || fail "metrics.jsonl does not record the steps' count"
import json, sys
counts = [json.loads(l)["kernels_per_step"] for l in open(sys.argv[1]) if '"kernels_per_step"' in l]
bench = json.load(open(sys.argv[2]))["rows"][0]["kernels_per_step"]
print("metrics.jsonl kernels_per_step:", counts, "srubench:", bench)
sys.exit(0 if len(counts) == 4 and set(counts) == {bench} else 1)
PY
    ;;
  batch_shapes)
    # srubench batch-shapes: the WMT config's padding on a small parallel corpus, without and with length
    # buckets (and the plan at a single graph), checked against each other: the buckets give fewer shapes
    # and more padded positions a piece, every row's share of replayable steps follows the plan.
    python3 "$src/scripts/reproduce/make_data.py" parallel "$work/pairs" > /dev/null
    shapes() {  # NAME ARGS...: srubench batch-shapes of wmt-base on the pairs, JSON in $work/NAME.json
      local name=$1; shift
      "$build/srubench" --threads 1 batch-shapes --config="$src/configs/translate/wmt-base.yaml" \
        --set data.path="$work/pairs/train.en" --set data.target_path="$work/pairs/train.de" \
        --set data.valid_source="$work/pairs/valid.en" --set data.valid_target="$work/pairs/valid.de" \
        --set data.test_source= --set data.test_target= --set data.vocab_size=100 --set data.max_tokens=300 \
        "$@" --epochs 2 --json "$work/$name.json" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "batch-shapes $name"; }
      cat "$work/$name.log"
    }
    shapes multiple --set "data.length_buckets=[]"
    shapes buckets --set "data.length_buckets=[16, 32, 64]"
    shapes one_graph --set "data.length_buckets=[16, 32, 64]" --set train.cuda_graphs_max=1 --set train.accumulate=1
    python3 - "$work" <<'PY' || fail "batch-shapes rows disagree"
import json, sys
rows = {n: json.load(open(f"{sys.argv[1]}/{n}.json"))["rows"] for n in ("multiple", "buckets", "one_graph")}
m, b, one = rows["multiple"][0], rows["buckets"][0], rows["one_graph"][0]
assert len(rows["multiple"]) == 2 and rows["multiple"][0]["batch_shapes"] == rows["multiple"][1]["batch_shapes"], rows
assert b["batch_shapes"] < m["batch_shapes"], (b, m)
for side in ("source", "target"):
    assert b[f"{side}_padded_per_piece"] > m[f"{side}_padded_per_piece"] >= 1, (side, b, m)
# train.accumulate 5: a key a batch shape and the update's (and a one-batch step's, when the epoch's last
# step has one batch); one batch a step: a key a shape.
assert b["batch_shapes"] + 1 <= b["graph_keys"] <= b["batch_shapes"] + 2 and one["graph_keys"] == one["batch_shapes"], (b, one)
assert b["steps"] * 5 >= b["batches"] > (b["steps"] - 1) * 5 and one["steps"] == one["batches"], (b, one)
assert b["replayable_share"] == 1 and 0 < one["replayable_share"] < 1, (b, one)
print("ok: batch-shapes", {k: (m[k], b[k]) for k in ("batch_shapes", "source_padded_per_piece", "replayable_share")})
PY
    ;;
  precision)
    # train.precision bf16 (every product's operands rounded to bfloat16; on the CPU by the twin of the
    # GPU's kernel): 300 steps of a small char-LM end within 0.05 BPC of fp32, on losses that differ
    # (so the rounding happened); srueval --precision bf16 evaluates that checkpoint alike; int8 and
    # fp16 are refused naming the key; the old key train.matmul_precision still reads, as precision.
    set -- --config "$tiny" --set data.path="$data" --set train.max_steps=300 --set eval.every_steps=0 \
      --set log.every_steps=100 --set model.hidden_size=64 --set model.embedding_size=32 --set data.batch_size=8 \
      --set data.bptt=64 --set data.valid_fraction=0.01 --set train.threads=1
    "$train" "$@" --run-dir "$work/fp32" > "$work/fp32.log" 2>&1 || { cat "$work/fp32.log"; fail "fp32 run"; }
    "$train" "$@" --set train.precision=bf16 --run-dir "$work/bf16" > "$work/bf16.log" 2>&1 \
      || { cat "$work/bf16.log"; fail "bf16 run"; }
    matches "train.precision bf16 on the CPU: (products on AVX512-BF16|product operands rounded to BF16)" \
      "$(cat "$work/bf16.log")" \
      || fail "the bf16 run does not say what bf16 means on the CPU"
    "$eval" --checkpoint "$work/bf16/last.safetensors" --precision bf16 --json "$work/eval.json" > /dev/null \
      || fail "srueval --precision bf16"
    python3 - "$work" <<'PY' || fail "bf16 is not within 0.05 BPC of fp32, or did not round"
import json, sys
w = sys.argv[1]
def losses(run):
    return [json.loads(l)["loss"] for l in open(f"{w}/{run}/metrics.jsonl") if '"loss"' in l and '"eval"' not in l]
fp32, bf16 = (json.load(open(f"{w}/{r}/summary.json"))["final"]["valid"]["bpc"] for r in ("fp32", "bf16"))
ev = json.load(open(f"{w}/eval.json"))
print("valid bpc fp32", fp32, "bf16", bf16, "srueval bf16", ev["metrics"]["bpc"], "losses", losses("fp32")[-1], losses("bf16")[-1])
assert abs(bf16 - fp32) < 0.05 and losses("fp32") != losses("bf16")
assert ev["precision"] == "bf16" and abs(ev["metrics"]["bpc"] - bf16) < 1e-6
PY
    for bad in int8 fp16; do
      out=$("$train" --config "$tiny" --set data.path="$data" --set train.precision=$bad --run-dir "$work/$bad" 2>&1) \
        && fail "train.precision=$bad was accepted"
      matches "train.precision: '$bad' is not one of: fp32, tf32, bf16" "$out" || fail "unclear refusal of $bad: $out"
    done
    out=$("$train" --config "$tiny" --set data.path="$data" --set train.matmul_precision=medium --print-config 2>&1) \
      || fail "train.matmul_precision=medium no longer reads: $out"
    matches 'precision: "bf16"' "$out" || fail "train.matmul_precision=medium did not read as bf16: $out"
    echo "ok: bf16 within 0.05 BPC of fp32; int8 and fp16 refused; train.matmul_precision reads as train.precision"
    ;;
  precision_models)
    # train.precision bf16 through every model family and task head (Linear, attention and the SRU++
    # transform answer in bf16; residual streams, losses and parameters stay float32): a few steps of
    # each train, srueval evaluates the checkpoint at bf16 (the translation model decodes with beam 5)
    # and every metric it reports is finite.
    last_word_sentences > "$work/sents.txt"
    word_for_word_pairs
    sample=$src/data/squad-sample/dev-v1.1.sample.json
    at_bf16() {
      local name=$1; shift
      "$train" "$@" --set train.precision=bf16 --set train.max_steps=4 --set train.threads=1 --set log.progress=false \
        --run-dir "$work/$name" > "$work/$name.log" 2>&1 || { tail -5 "$work/$name.log"; fail "$name at bf16"; }
      "$eval" --checkpoint "$work/$name/last.safetensors" --precision bf16 --json "$work/$name.json" > "$work/$name.eval.log" 2>&1 \
        || { tail -5 "$work/$name.eval.log"; fail "srueval --precision bf16 of $name"; }
      python3 -c "import json, math, sys; m = json.load(open(sys.argv[1]))['metrics']; print(sys.argv[2], m); \
sys.exit(0 if m and all(math.isfinite(v) for v in m.values() if isinstance(v, (int, float))) else 1)" \
        "$work/$name.json" "$name" || fail "$name: a metric is not finite at bf16"
    }
    at_bf16 charlm-lstm --config "$tiny" --set data.path="$data" --set model.type=lstm
    at_bf16 charlm-srupp --config "$tiny" --set data.path="$data" --set model.type=srupp --set model.proj_size=8 \
      --set model.num_heads=2 --set model.memory_length=16
    at_bf16 classify --config "$src/tests/data/classify_tiny.yaml" --set data.path="$work/sents.txt" --set data.fold=0
    at_bf16 squad --config "$src/tests/data/squad_tiny.yaml" --set data.path="$sample" --set data.valid_path="$sample"
    at_bf16 translate-base --config "$src/configs/translate/multi30k-base.yaml" "${tiny_translation[@]}"
    at_bf16 translate-sru --config "$src/configs/translate/multi30k-sru-4.yaml" "${tiny_translation[@]}"
    at_bf16 translate-ssru --config "$src/configs/translate/multi30k-ssru.yaml" "${tiny_translation[@]}"
    echo "ok: every model family trains and evaluates at bf16"
    ;;
  overfit)
    # A small SRU memorises 1000 bytes of text: BPC on the very text it trained on falls near zero.
    head -c 1000 "$data" > "$work/short.txt"
    "$train" --config "$tiny" --run-dir "$work/run" --set data.path="$work/short.txt" --set data.valid_fraction=0 \
      --set data.test_fraction=0 --set data.batch_size=2 --set data.bptt=50 --set data.eval_batch_size=2 \
      --set model.hidden_size=128 --set model.embedding_size=32 --set model.dropout=0 --set model.output_dropout=0 \
      --set train.max_steps=400 --set train.epochs=1000 --set eval.every_steps=1000 --set log.every_steps=100 \
      > /dev/null || fail "training failed"
    bpc=$("$eval" --checkpoint "$work/run/last.safetensors" --split train | sed 's/.*bpc \([^ ]*\).*/\1/')
    python3 -c "import sys; b = float('$bpc'); print('train BPC after 400 steps:', b); sys.exit(0 if b < 0.2 else 1)" \
      || fail "the model did not memorise the text"
    ;;
  classify)
    last_word_sentences > "$work/sents.txt"
    ctiny=$src/tests/data/classify_tiny.yaml
    "$train" --config "$ctiny" --set data.path="$work/sents.txt" --run-dir "$work/cv" > "$work/cv.log" 2>&1 \
      || { tail "$work/cv.log"; fail "cross-validation run failed"; }
    for f in 0 1 2; do [ -f "$work/cv/fold-$f/best.safetensors" ] || fail "fold $f has no best checkpoint"; done
    mean=$(sed -n 's/.*"test_accuracy_mean": \([0-9.e-]*\).*/\1/p' "$work/cv/cv_summary.json")
    python3 -c "import sys; m = float('$mean'); print('3-fold test accuracy', m); sys.exit(0 if m > 0.9 else 1)" \
      || fail "the classifier did not learn the last-word task"
    # srueval reproduces fold 0's test accuracy from its best checkpoint, and scores any labelled file.
    "$eval" --checkpoint "$work/cv/fold-0/best.safetensors" --split test --json "$work/eval.json" > /dev/null \
      || fail "srueval failed"
    a=$(python3 -c "import json; print(json.load(open('$work/eval.json'))['metrics']['accuracy'])")
    b=$(python3 -c "import json; print(json.load(open('$work/cv/fold-0/summary.json'))['best']['test']['accuracy'])")
    [ "$a" = "$b" ] || fail "srueval test accuracy $a differs from the run's $b"
    matches "accuracy" "$("$eval" --checkpoint "$work/cv/fold-0/best.safetensors" --text "$work/sents.txt")" \
      || fail "srueval --text failed"
    printf 'w1 w2 yes\nw3 no\nw4 w4 w4 w4 yes\n\n' > "$work/unlabeled.txt"  # the empty line gets a class too
    predicted=$("$eval" --checkpoint "$work/cv/fold-0/best.safetensors" --predict "$work/unlabeled.txt" | tr '\n' ' ')
    matches "^1 0 1 [01] $" "$predicted" || fail "srueval --predict gave '$predicted', expected 1 0 1 and a 4th class"
    # Resuming a finished cross-validation reruns nothing; a missing fold is trained again.
    "$train" --resume "$work/cv" > "$work/again.log" 2>&1 || fail "resume of a finished run failed"
    [ "$(grep -c 'already finished' "$work/again.log")" = 3 ] || fail "finished folds were rerun"
    rm -rf "$work/cv/fold-2"
    "$train" --resume "$work/cv" > "$work/again.log" 2>&1 || fail "resume with a missing fold failed"
    grep -q "fold 3 of 3: training" "$work/again.log" || fail "the missing fold was not trained"
    [ -f "$work/cv/fold-2/summary.json" ] || fail "fold 2 not rebuilt"
    expect_error "run directory '$work/cv' already holds a run" "$train" --config "$ctiny" --set data.path="$work/sents.txt" \
      --run-dir "$work/cv"
    expect_error "data.fold 5 is out of range: data.folds is 3" "$train" --config "$ctiny" --set data.path="$work/sents.txt" \
      --set data.fold=5 --run-dir "$work/bad"
    expect_error "cannot open data file '$work/no-such.txt' \(data.path\)" "$train" --config "$ctiny" --set data.path="$work/no-such.txt" --run-dir "$work/bad2"
    echo "ok: 3-fold cross-validation, srueval, resume"
    ;;
  get_data)
    # A mirror with a wrong file: the checksum stops it, and nothing unverified is left in DEST.
    mkdir -p "$work/mirror/sentclass"
    echo "1 not the real data" > "$work/mirror/sentclass/rt-polarity.all"
    expect_error "rt-polarity.all has md5 [0-9a-f]+, expected 908b4ca55b130f6adb0b5d55868b35fa" \
      bash "$src/scripts/get_data.sh" classify --mirror "$work/mirror" --dest "$work/dest"
    [ -z "$(ls -A "$work/dest")" ] || fail "an unverified file was left in the destination"
    expect_error "mirror directory '$work/none' does not exist" \
      bash "$src/scripts/get_data.sh" classify --mirror "$work/none" --dest "$work/dest"
    expect_error "unknown data set 'imagenet'" bash "$src/scripts/get_data.sh" imagenet
    matches "get_data.sh classify" "$(bash "$src/scripts/get_data.sh" --help)" || fail "--help"
    # SQuAD: a wrong dev file is refused the same way.
    mkdir -p "$work/sq/squad"
    echo '{"data": [], "version": "1.1"}' > "$work/sq/squad/dev-v1.1.json"
    expect_error "dev-v1.1.json has md5 [0-9a-f]+, expected 3e85deb501d4e538b6bc56f786231552" \
      bash "$src/scripts/get_data.sh" squad --mirror "$work/sq" --dest "$work/sqdest"
    [ -z "$(ls -A "$work/sqdest")" ] || fail "an unverified SQuAD file was left in the destination"
    ;;
  get_data_ptb)
    # A mirror with a wrong file: refused by its md5, nothing unverified left; the project's mirror installs.
    mkdir -p "$work/mirror/ptb"
    echo " not the penn treebank" > "$work/mirror/ptb/ptb.train.txt"
    expect_error "ptb.train.txt has md5 [0-9a-f]+, expected f26c4b92c5fdc7b3f8c7cdcb991d8420" \
      bash "$src/scripts/get_data.sh" ptb --mirror "$work/mirror" --dest "$work/dest"
    [ -z "$(ls -A "$work/dest")" ] || fail "an unverified file was left in the destination"
    ;;
  get_data_multi30k)
    # Fake mirrors (the project's mirror is not needed): a wrong file is refused by its md5 and nothing
    # unverified is left in DEST, in DIR/multi30k/ and in DIR/ alike; a missing file is named.
    mkdir -p "$work/mirror/multi30k" "$work/flat"
    printf 'A dog runs.\n' | gzip > "$work/mirror/multi30k/train.en.gz"
    expect_error "train.en.gz has md5 [0-9a-f]+, expected 0065d13af80720a55ca8153d126e6627" \
      bash "$src/scripts/get_data.sh" multi30k --mirror "$work/mirror" --dest "$work/dest"
    [ -z "$(ls -A "$work/dest")" ] || fail "an unverified file was left in the destination"
    expect_error "the mirror has no $work/flat/train.en.gz" \
      bash "$src/scripts/get_data.sh" multi30k --mirror "$work/flat" --dest "$work/dest"
    cp "$work/mirror/multi30k/train.en.gz" "$work/flat/"
    expect_error "train.en.gz has md5 [0-9a-f]+, expected 0065d13af80720a55ca8153d126e6627" \
      bash "$src/scripts/get_data.sh" multi30k --mirror "$work/flat" --dest "$work/dest"
    [ -z "$(ls -A "$work/dest")" ] || fail "an unverified file was left in the destination"
    matches "get_data.sh multi30k" "$(bash "$src/scripts/get_data.sh" --help)" || fail "--help does not list multi30k"
    ;;
  average)
    # srueval --average: checkpoints at steps 4, 8 and 12 of one run average element-wise (checked in
    # double against the files), the result evaluates; a checkpoint averaged with itself evaluates to the
    # same numbers; different models, --out among the inputs and a single checkpoint are refused, and
    # nothing is written then.
    tiny_run --run-dir "$work/r" --set train.max_steps=4 --set eval.every_steps=4 > /dev/null || fail "run to step 4"
    cp "$work/r/last.safetensors" "$work/s4.safetensors"
    "$train" --resume "$work/r" --set train.max_steps=8 > /dev/null || fail "resume to step 8"
    cp "$work/r/last.safetensors" "$work/s8.safetensors"
    "$train" --resume "$work/r" --set train.max_steps=12 > /dev/null || fail "resume to step 12"
    cp "$work/r/last.safetensors" "$work/s12.safetensors"
    out=$("$eval" --average "$work/s4.safetensors" "$work/s8.safetensors" "$work/s12.safetensors" --out "$work/avg.safetensors") \
      || fail "--average failed: $out"
    echo "$out"
    matches "averaged 3 checkpoints \(steps 4, 8, 12\) -> .*avg.safetensors: 11 model tensors, no optimiser state" "$out" \
      || fail "unexpected summary"
    PYTHONPATH="$src/tests/e2e" python3 - "$work" << 'PY' || fail "the averaged weights are not the mean of the three"
import sys
from st_read import read, floats
w = sys.argv[1]
parts = [read(f"{w}/s{s}.safetensors")[0] for s in (4, 8, 12)]
avg, meta = read(f"{w}/avg.safetensors")
assert not any(k.startswith("optim.") for k in avg), "optimiser state in the average"
assert "s12.safetensors (step 12)" in meta["averaged_from"] and meta["step"] == "12", meta
model = [k for k in parts[0] if not k.startswith(("optim.", "task.")) and parts[0][k][0] == "F32"]
assert model and all(k in avg for k in model)
worst = 0.0
for k in model:
    values = [floats(p[k]) for p in parts]
    for j, x in enumerate(floats(avg[k])):
        mean = sum(v[j] for v in values) / 3
        worst = max(worst, abs(x - mean) / max(1.0, abs(mean)))
print(f"{len(model)} model tensors, largest difference from the mean {worst:.2g}")
assert worst < 1e-6
PY
    "$eval" --checkpoint "$work/avg.safetensors" --split valid > "$work/avg.txt" || fail "the average does not evaluate"
    matches "valid: .*bpc [0-9.]+" "$(cat "$work/avg.txt")" || fail "no BPC for the average"
    "$eval" --average "$work/s12.safetensors" "$work/s12.safetensors" --out "$work/same.safetensors" > /dev/null \
      || fail "averaging a checkpoint with itself failed"
    [ "$("$eval" --checkpoint "$work/same.safetensors" --split valid)" = "$("$eval" --checkpoint "$work/s12.safetensors" --split valid)" ] \
      || fail "a checkpoint averaged with itself evaluates differently"
    tiny_run --run-dir "$work/wide" --set model.hidden_size=48 --set train.max_steps=2 > /dev/null || fail "wide run"
    expect_error "srueval: error: --average: the checkpoints hold different models: the config key model.hidden_size is 32 in .*s4.safetensors and 48 in .*wide/last.safetensors" \
      "$eval" --average "$work/s4.safetensors" "$work/wide/last.safetensors" --out "$work/bad.safetensors"
    [ ! -e "$work/bad.safetensors" ] || fail "a refused average wrote its output"
    before=$(md5sum < "$work/s8.safetensors")
    expect_error "--out .*s8.safetensors is one of the checkpoints being averaged" \
      "$eval" --average "$work/s4.safetensors" "$work/s8.safetensors" --out "$work/s8.safetensors"
    [ "$(md5sum < "$work/s8.safetensors")" = "$before" ] || fail "an input was overwritten"
    expect_error "--average" "$eval" --average "$work/s4.safetensors" --out "$work/bad.safetensors"
    [ ! -e "$work/bad.safetensors" ] || fail "a single checkpoint wrote an average"
    echo "ok: three checkpoints averaged to their mean and evaluated; refusals wrote nothing"
    ;;
  ema)
    # train.ema_decay: training itself is untouched (the losses of a run without it); checkpoints' model
    # tensors are the moving average and raw.* the weights the run without it ends with, bit for bit;
    # evaluation during training and srueval see the average, srueval --raw-weights the raw weights; a run
    # stopped at step 6 and resumed writes the same tensors as an uninterrupted one; turned off at resume
    # the run continues from the raw weights, turned on it starts averaging from the checkpoint's;
    # best.safetensors holds raw.* only with train.ema_keep_raw.
    set -- --set train.ema_decay=0.8 --set train.ema_start_step=2
    tiny_run --run-dir "$work/plain" > /dev/null 2>&1 || fail "run without the average"
    tiny_run "$@" --run-dir "$work/full" > "$work/full.log" 2>&1 || { cat "$work/full.log"; fail "run with the average"; }
    diff <(losses "$work/plain") <(losses "$work/full") || fail "the average changed the training losses"
    [ "$(grep -c "eval step .* (weight average)" "$work/full.log")" -eq 2 ] || fail "the evaluations do not say they use the average"
    tiny_run "$@" --run-dir "$work/part" --set train.max_steps=6 > /dev/null 2>&1 || fail "run to step 6"
    "$train" --resume "$work/part" --set train.max_steps=12 > "$work/resume.log" 2>&1 || { cat "$work/resume.log"; fail "resume"; }
    matches "the weight average \(train.ema_decay\) and the raw weights resume from the checkpoint" "$(cat "$work/resume.log")" \
      || fail "the resume does not say it restored the average"
    tiny_run --run-dir "$work/off" --set train.max_steps=6 "$@" > /dev/null 2>&1 || fail "run to step 6 (off)"
    "$train" --resume "$work/off" --set train.max_steps=12 --set train.ema_decay=0 > "$work/off.log" 2>&1 || fail "resume with it off"
    matches "training continues from the checkpoint's raw weights" "$(cat "$work/off.log")" || fail "no message when turned off"
    tiny_run --run-dir "$work/on" --set train.max_steps=6 > /dev/null 2>&1 || fail "run to step 6 (on)"
    "$train" --resume "$work/on" --set train.max_steps=12 --set train.ema_decay=0.8 > "$work/on.log" 2>&1 || fail "resume with it on"
    matches "has no raw weights .* the weight average starts from its weights" "$(cat "$work/on.log")" || fail "no message when turned on"
    tiny_run "$@" --run-dir "$work/keep" --set train.ema_keep_raw=true > /dev/null 2>&1 || fail "run with ema_keep_raw"
    PYTHONPATH="$src/tests/e2e" python3 - "$work" << 'PY' || fail "checkpoint contents"
import sys
from st_read import read, floats
w = sys.argv[1]
plain, full, part, off = (read(f"{w}/{r}/last.safetensors")[0] for r in ("plain", "full", "part", "off"))
model = [k for k in plain if not k.startswith(("optim.", "task."))]
raw = [k for k in full if k.startswith("raw.")]
# The trainable parameters (weight_c too: SRU v2 trains it), not the buffers (scale_x).
assert raw and all(k[4:] in model for k in raw) and len(raw) < len(model), raw
assert sorted(full) == sorted(part) and all(full[k] == part[k] for k in full), \
    [k for k in full if full[k] != part.get(k)]
assert all(full["raw." + k[4:]][2] == plain[k[4:]][2] for k in raw), "raw.* differ from the run without the average"
assert all(full[k[4:]][2] != plain[k[4:]][2] for k in raw), "some model tensor is not an average"
assert all(off[k] == plain[k] for k in plain), "turned off at resume: not the run without the average"
worst = max(max(abs(a - b) for a, b in zip(floats(full[k[4:]]), floats(full[k]))) for k in raw)
print(f"{len(raw)} averaged tensors; largest |average - raw| {worst:.3g}; resumed file equal to the uninterrupted one")
best, keep = read(f"{w}/full/best.safetensors")[0], read(f"{w}/keep/best.safetensors")[0]
assert not any(k.startswith("raw.") for k in best) and sum(k.startswith("raw.") for k in keep) == len(raw)
PY
    [ "$("$eval" --checkpoint "$work/full/last.safetensors" --split valid --raw-weights)" = \
      "$("$eval" --checkpoint "$work/plain/last.safetensors" --split valid)" ] || fail "--raw-weights evaluates otherwise than the raw run"
    "$eval" --checkpoint "$work/full/last.safetensors" --split valid --json "$work/e.json" > /dev/null || fail "srueval"
    python3 - "$work/full/summary.json" "$work/e.json" << 'PY' || fail "srueval does not evaluate the average the run ended with"
import json, sys
final, again = json.load(open(sys.argv[1]))["final"]["valid"], json.load(open(sys.argv[2]))["metrics"]
print("valid bpc: final evaluation", final["bpc"], "srueval", again["bpc"])
assert final == again
PY
    expect_error "--raw-weights: .*plain/last.safetensors holds no raw weights" \
      "$eval" --checkpoint "$work/plain/last.safetensors" --split valid --raw-weights
    expect_error "train.ema_decay: 1 is out of range" tiny_run --set train.ema_decay=1 --run-dir "$work/bad"
    expect_error "--raw-weights .* does not apply to --average" "$eval" --raw-weights --average "$work/full/last.safetensors" \
      "$work/part/last.safetensors" --out "$work/bad.safetensors"
    [ ! -e "$work/bad.safetensors" ] || fail "a refused --raw-weights --average wrote its output"
    echo "ok: the moving average is evaluated and saved, resumes exactly, and leaves training alone"
    ;;
  get_data_enwik8_mirror)
    # A mirror holding only a genuine prefix of enwik8 (the shipped 1 MB sample is its first 10^6 bytes)
    # and an MD5SUMS that lists it: installed as enwik8.prefix and announced as a prefix, never as
    # enwik8; a checksum that does not match, or none, is refused with nothing installed; the installed
    # prefix trains. The path the project's own mirror takes, with data CI has.
    mkdir -p "$work/m/enwik8-prefix" "$work/dest" "$work/bad/enwik8-prefix"
    cp "$data" "$work/m/enwik8-prefix/enwik8.first1000000bytes"
    (cd "$work/m" && md5sum enwik8-prefix/enwik8.first1000000bytes > MD5SUMS)
    out=$(bash "$src/scripts/get_data.sh" enwik8 --mirror "$work/m" --dest "$work/dest" 2>&1) || fail "enwik8 prefix: $out"
    echo "$out"
    matches "only a PREFIX of enwik8: the first 1000000 of 100000000 bytes \(1.00%\), md5 $(md5sum < "$data" | cut -d' ' -f1)" \
      "$out" || fail "the prefix was not announced as a prefix with its size and md5"
    matches "NOT the enwik8 benchmark" "$out" || fail "no warning that the prefix is not the benchmark"
    cmp -s "$data" "$work/dest/enwik8.prefix" && [ ! -e "$work/dest/enwik8" ] || fail "expected exactly the prefix as enwik8.prefix"
    cp "$data" "$work/bad/enwik8-prefix/enwik8.first1000000bytes"
    expect_error "lists no checksum for enwik8-prefix/enwik8.first1000000bytes" \
      bash "$src/scripts/get_data.sh" enwik8 --mirror "$work/bad" --dest "$work/bad-dest"
    echo "0123456789abcdef0123456789abcdef  enwik8-prefix/enwik8.first1000000bytes" > "$work/bad/MD5SUMS"
    expect_error "enwik8.first1000000bytes has md5 [0-9a-f]+, MD5SUMS says 0123456789abcdef0123456789abcdef" \
      bash "$src/scripts/get_data.sh" enwik8 --mirror "$work/bad" --dest "$work/bad-dest"
    [ -z "$(ls -A "$work/bad-dest" 2> /dev/null)" ] || fail "a refused prefix left files in the destination"
    mkdir -p "$work/empty"
    expect_error "holds neither enwik8.zip, a verified enwik8, nor enwik8-prefix" \
      bash "$src/scripts/get_data.sh" enwik8 --mirror "$work/empty" --dest "$work/bad-dest"
    "$train" --config "$tiny" --set data.path="$work/dest/enwik8.prefix" --set train.max_steps=2 --run-dir "$work/run" \
      > "$work/run.log" 2>&1 || { cat "$work/run.log"; fail "training on the installed prefix failed"; }
    echo "ok: the mirror's prefix installed, announced and refused as it should; it trains"
    ;;
  get_data_squad_mirror)
    # The project's mirror (../shared/data): wrong full train files are refused, the genuine dev file and
    # the train subset install. Exit 77 (SKIPPED) where the mirror is absent, as in CI.
    mkdir -p "$work/sq/squad" "$work/sqdest"
    real=$src/../shared/data  # the project's local mirror; the rest needs its genuine dev-v1.1.json
    if [ ! -f "$real/squad/dev-v1.1.json" ]; then echo "SKIPPED: no $real/squad/dev-v1.1.json (the project's data mirror)"; exit 77; fi
    cp "$real/squad/dev-v1.1.json" "$work/sq/squad/"
    echo '{"data": []}' > "$work/sq/squad/train-v1.1.json"  # a wrong full train file is never replaced by a subset
    echo '{"data": []}' > "$work/sq/squad/train-v1.1.subset-1-articles.json"
    expect_error "train-v1.1.json has md5 [0-9a-f]+, expected 981b29407e0affa3b1b156f72073b945" \
      bash "$src/scripts/get_data.sh" squad --mirror "$work/sq" --dest "$work/sqdest"
    [ "$(ls "$work/sqdest")" = dev-v1.1.json ] || fail "expected only the verified dev file in the destination"
    rm "$work/sq/squad/train-v1.1.json"
    expect_error "MD5SUMS lists no checksum for squad/train-v1.1.subset-1-articles.json" \
      bash "$src/scripts/get_data.sh" squad --mirror "$work/sq" --dest "$work/sqdest"
    echo "0123456789abcdef0123456789abcdef  squad/train-v1.1.subset-1-articles.json" > "$work/sq/MD5SUMS"
    expect_error "train-v1.1.subset-1-articles.json has md5 [0-9a-f]+, expected 0123456789abcdef0123456789abcdef" \
      bash "$src/scripts/get_data.sh" squad --mirror "$work/sq" --dest "$work/sqdest"
    out=$(bash "$src/scripts/get_data.sh" squad --mirror "$real" --dest "$work/sqreal" 2>&1) || fail "squad from $real: $out"
    echo "$out"
    matches "only a SUBSET of train-v1.1.json" "$out" || fail "the train subset was not announced as a subset"
    [ -f "$work/sqreal/dev-v1.1.json" ] && [ -f "$work/sqreal/train-v1.1.subset-44-articles.json" ] \
      || fail "dev and the train subset were not installed"
    [ ! -e "$work/sqreal/train-v1.1.json" ] || fail "a subset was installed as train-v1.1.json"
    ;;
  get_data_ptb_mirror)
    # The project's mirror installs the three PTB files (exit 77 without it).
    real=$src/../shared/data
    if [ ! -d "$real/ptb" ]; then echo "SKIPPED: no $real/ptb (the project's data mirror)"; exit 77; fi
    bash "$src/scripts/get_data.sh" ptb --mirror "$real" --dest "$work/ptb" || fail "ptb from $real"
    [ "$(ls "$work/ptb" | tr '\n' ' ')" = "ptb.test.txt ptb.train.txt ptb.valid.txt " ] || fail "expected the three files"
    ;;
  get_data_multi30k_mirror)
    # The project's mirror installs the 12 Multi30k files (exit 77 without it).
    real=$src/../shared/data
    if [ ! -d "$real/multi30k" ]; then echo "SKIPPED: no $real/multi30k (the project's data mirror)"; exit 77; fi
    bash "$src/scripts/get_data.sh" multi30k --mirror "$real" --dest "$work/m30" > "$work/m30.log" \
      || fail "multi30k from $real: $(tail -3 "$work/m30.log")"
    [ "$(ls "$work/m30" | wc -l)" = 12 ] || fail "expected the 12 files: $(ls "$work/m30")"
    [ "$(gzip -dc "$work/m30/train.en.gz" | wc -l)" = 29000 ] || fail "train.en.gz does not have 29,000 lines"
    ;;
  ptb_variants)
    # A tiny PTB-like text: every PTB encoder trains on it through its small-*.yaml config, a trained v1
    # SRU converts to Super-Embed-SRU with the same perplexity, and conversions that cannot be exact are
    # refused without writing anything.
    RANDOM=11
    for f in train valid test; do
      n=40; [ $f = train ] && n=300
      for i in $(seq $n); do
        line=""
        for w in $(seq $((2 + RANDOM % 8))); do line="$line w$((RANDOM % 30))"; done
        echo "$line"
      done > "$work/$f.txt"
    done
    small() {  # small MODEL RUN_DIR [--set ...]
      "$train" --config "$src/configs/ptb/small-$1.yaml" --run-dir "$2" --set data.path="$work/train.txt" \
        --set data.valid_path="$work/valid.txt" --set data.test_path="$work/test.txt" --set model.hidden_size=16 \
        --set model.embedding_size=16 --set data.batch_size=4 --set data.bptt=10 --set data.eval_batch_size=2 \
        --set train.epochs=2 --set log.progress=false "${@:3}"
    }
    for m in sru lstm embed-sru super-embed-sru; do
      small $m "$work/$m" > "$work/$m.log" 2>&1 || { tail -5 "$work/$m.log"; fail "$m run failed"; }
      grep -q '"test"' "$work/$m/summary.json" || fail "$m: no test perplexity in summary.json"
      echo "ok: $m: $(grep -o 'final: .*' "$work/$m.log")"
    done
    "$eval" --checkpoint "$work/sru/best.safetensors" --convert super-embed --out "$work/super.safetensors" \
      || fail "conversion failed"
    for c in "$work/sru/best.safetensors" "$work/super.safetensors"; do
      "$eval" --checkpoint "$c" --split test --json "$c.json" > /dev/null || fail "srueval $c failed"
    done
    python3 - "$work/sru/best.safetensors.json" "$work/super.safetensors.json" <<'PY' || fail "the conversion changed the perplexity"
import json, sys
a, b = (json.load(open(p))["metrics"]["ppl"] for p in sys.argv[1:])
print("test ppl: sru", a, "super-embed-sru", b)
sys.exit(0 if abs(a - b) <= 1e-6 * a else 1)
PY
    expect_error "the model's encoder is lstm \(model.type\); only a v1 SRU" \
      "$eval" --checkpoint "$work/lstm/last.safetensors" --convert super-embed --out "$work/x.safetensors"
    expect_error "--convert needs --out FILE" "$eval" --checkpoint "$work/sru/last.safetensors" --convert super-embed
    small sru "$work/sru-v2" --set model.v1=false > /dev/null 2>&1 || fail "the non-v1 SRU run failed"
    expect_error "c_\{t-1\} terms in its gates \(model.v1: false\)" \
      "$eval" --checkpoint "$work/sru-v2/last.safetensors" --convert super-embed --out "$work/x.safetensors"
    [ ! -e "$work/x.safetensors" ] || fail "a refused conversion wrote a file"
    "$build/srubench" --warm-up-seconds 0 eval --checkpoint "$work/sru/best.safetensors" \
      --checkpoint "$work/super.safetensors" --repeats 1 --warmup 0 > "$work/bench.txt" || fail "srubench eval failed"
    cat "$work/bench.txt"
    grep -q "super-embed-sru encoder" "$work/bench.txt" || fail "srubench eval printed no encoder row"
    ;;
  fixtures)
    # Checkpoints written by an earlier build (commit 4469660; tests/data/fixtures/README.md), one per
    # encoder kind, still load and give that build's numbers: srueval --text on each, every metric of
    # expected.json within 1e-6 relative.
    python3 - "$eval" "$src/tests/data/fixtures" "$work" <<'PY' || fail "a checkpoint fixture no longer gives its expected metrics"
import json, os, subprocess, sys
srueval, fx, work = sys.argv[1:]
expected = json.load(open(os.path.join(fx, "expected.json")))["fixtures"]
bad = []
for name, e in expected.items():
    out = os.path.join(work, name + ".json")
    cmd = [srueval, "--threads", "1", "--checkpoint", os.path.join(fx, e["checkpoint"]),
           "--text", os.path.join(fx, e["text"]), "--json", out]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        bad.append(f"fixture {name}: srueval exited {run.returncode}: {(run.stdout + run.stderr).strip()}")
        continue
    got = json.load(open(out))["metrics"]
    for metric, want in e["metrics"].items():
        if metric not in got:
            bad.append(f"fixture {name}: metric {metric} missing (srueval gave {sorted(got)})")
        elif abs(got[metric] - want) > 1e-6 * abs(want):
            bad.append(f"fixture {name}: metric {metric} is {got[metric]!r}, expected {want!r}")
        else:
            print(f"ok: fixture {name}: {metric} {got[metric]!r}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
    ;;
  *) fail "unknown case $case" ;;
esac
echo "PASS: $case"
