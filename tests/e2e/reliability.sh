#!/usr/bin/env bash
# Crash and write-failure safety of srutrain's run directory (issue 28):
#   kill_trials      SIGKILL a training run (SRU_KILL_TRIALS, default 24; seed SRU_KILL_SEED): odd trials
#                    at a seeded random moment, even ones aimed at a checkpoint write (after a random
#                    delay, killed the moment a temporary appears in the run directory), so that kills
#                    inside a write do not depend on luck: every checkpoint left loads, nothing torn is
#                    left, and --resume (or a fresh start where no checkpoint was written yet) ends with
#                    exactly the losses, evaluations and checkpoints of an uninterrupted run;
#   file_size_limit  a checkpoint write past `ulimit -f`;
#   full_disk        a checkpoint write on a full small filesystem (tmpfs);
#   read_only_dir    the run directory's filesystem remounted read-only mid-run;
# each ends the run with an error naming the file and the system's reason, exit 1, and the previous
# checkpoint intact (it loads, and the run resumes from it once the cause is gone). The mount cases
# report SKIPPED (exit 77) where tmpfs cannot be mounted (not root, no CAP_SYS_ADMIN).
# Usage: reliability.sh BUILD_DIR SOURCE_DIR CASE
set -uo pipefail
build=$1 src=$2 case=$3
source "$src/tests/e2e/common.sh"
mnt=$work/mnt pid=
# Also on a ctest timeout: stop a background run, then unmount, then remove.
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; umount "$mnt" 2>/dev/null; rm -rf "$work"' EXIT

# A run that checkpoints at every step (1.2 MB files: hidden size 128 with Adam's moments) and
# crosses an epoch boundary (21 steps per epoch of this 1.5 kB text).
head -c 1500 "$data" > "$work/text"
run_args=(--set data.path="$work/text" --set train.epochs=3 --set train.max_steps=30 --set eval.every_steps=1
          --set eval.max_batches=1 --set model.hidden_size=128 --set train.threads=1)
start_run() { "$train" --config "$tiny" "${run_args[@]}" --run-dir "$@"; }
# Every loss and evaluation record once, in step order (a resumed run repeats the steps after its
# checkpoint; equal repeats collapse, a differing one stays and fails the comparison).
# Timing fields (tokens_per_s, ms_per_step) are cut off: everything from "tokens_per_s" on.
records() {
  grep '"loss"' "$1/metrics.jsonl" | grep -v '"eval"' | sed 's/,"tokens_per_s".*//' | sort -u | sort -s -n -t: -k2,2
  grep '"eval"' "$1/metrics.jsonl" | sort -u
}
loads() { "$eval" --checkpoint "$1" --split valid --max-batches 1 > /dev/null 2>&1; }
# expect_write_error LOG REGEX: the run's output names the failed write and its reason.
expect_write_error() {
  tail -2 "$1"
  matches "$2" "$(cat "$1")" || fail "expected /$2/ in $1"
  echo "ok: message matches /$2/"
}
mount_tmpfs() {
  mkdir -p "$mnt"
  if ! mount -t tmpfs -o "size=$1" tmpfs "$mnt" 2> "$work/mount.err"; then
    echo "SKIPPED: cannot mount a tmpfs here: $(cat "$work/mount.err")"
    exit 77
  fi
}

case $case in
  kill_trials)
    begin=$(date +%s%N)
    start_run "$work/reference" > "$work/reference.log" 2>&1 || { cat "$work/reference.log"; fail "reference run"; }
    run_ms=$(( ($(date +%s%N) - begin) / 1000000 ))
    records "$work/reference" > "$work/reference.records"
    trials=${SRU_KILL_TRIALS:-24} RANDOM=${SRU_KILL_SEED:-28}
    finished=0 in_write=0 aimed=0 resumed=0 restarted=0 checkpoints=0
    shopt -s nullglob
    for i in $(seq "$trials"); do
      # A warm run is faster than the (first, cold) reference: random moments within 3/4 of its time,
      # aimed trials start polling within the first half, while writes are still to come.
      dir=$work/trial$i delay_ms=$(( RANDOM % (run_ms * 3 / 4 + 20) ))
      [ $((i % 2)) = 0 ] && delay_ms=$((delay_ms * 2 / 3))
      "$train" --config "$tiny" "${run_args[@]}" --run-dir "$dir" > "$dir.log" 2>&1 &  # $! is srutrain itself
      pid=$!
      sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
      if [ $((i % 2)) = 0 ]; then
        # Aimed: poll the directory (a glob and kill -0 are builtins: microseconds a turn, no fork)
        # until the next checkpoint temporary appears (not config.yaml's or summary.json's), then kill at
        # once, inside that write.
        aimed=$((aimed + 1))
        while kill -0 $pid 2> /dev/null; do
          temporaries=("$dir"/*.safetensors.tmp.*)
          [ ${#temporaries[@]} -gt 0 ] && break
        done
      fi
      kill -9 $pid 2> /dev/null
      wait $pid; rc=$?
      [ $rc = 0 ] && finished=$((finished + 1))
      [ $rc = 0 ] || [ $rc = 137 ] || { cat "$dir.log"; fail "trial $i: exit $rc"; }
      torn=$(ls "$dir" 2> /dev/null | grep -c '\.safetensors\.tmp\.')  # a checkpoint's, not config.yaml's
      [ "$torn" -gt 0 ] && in_write=$((in_write + 1))
      for f in "$dir"/*.safetensors; do
        [ -e "$f" ] || continue
        checkpoints=$((checkpoints + 1))
        loads "$f" || fail "trial $i (killed after $delay_ms ms): $f does not load"
      done
      if [ -e "$dir/last.safetensors" ]; then
        "$train" --resume "$dir" > "$dir.resume.log" 2>&1 || { cat "$dir.resume.log"; fail "trial $i: resume"; }
        resumed=$((resumed + 1))
      else  # killed before its first checkpoint: a new run in the same directory
        start_run "$dir" > "$dir.restart.log" 2>&1 || { cat "$dir.restart.log"; fail "trial $i: restart"; }
        restarted=$((restarted + 1))
      fi
      [ "$(ls "$dir" | grep -c '\.tmp\.')" = 0 ] || fail "trial $i: temporaries left after the rerun: $(ls "$dir")"
      records "$dir" | diff "$work/reference.records" - > "$work/diff" \
        || { head "$work/diff"; fail "trial $i (killed after $delay_ms ms): losses or evaluations differ"; }
      for f in last best; do
        cmp -s "$work/reference/$f.safetensors" "$dir/$f.safetensors" || fail "trial $i: $f.safetensors differs"
      done
      rm -rf "$dir" "$dir".*log
    done
    echo "$trials trials ($aimed aimed at a write) over a ${run_ms} ms run: $in_write killed inside a checkpoint write (a temporary left)," \
      "$checkpoints checkpoints left all loaded; $resumed resumed, $restarted restarted (no checkpoint yet)," \
      "$finished finished before the kill; every one ended with the reference's losses, evaluations and checkpoints"
    [ "$in_write" -gt 0 ] || fail "no trial landed inside a checkpoint write"
    ;;
  file_size_limit)
    start_run "$work/run" --set train.max_steps=10 > "$work/first.log" 2>&1 || fail "first run"
    cp "$work/run/last.safetensors" "$work/last.before"
    size_kb=$(( $(stat -c %s "$work/last.before") / 1024 ))
    # A limit below one checkpoint: the resumed run's first checkpoint write fails.
    ( ulimit -f $((size_kb / 2)); exec "$train" --resume "$work/run" --set train.max_steps=20 ) > "$work/limited.log" 2>&1
    rc=$?
    [ $rc = 1 ] || { cat "$work/limited.log"; fail "expected exit 1 past the file-size limit, got $rc"; }
    expect_write_error "$work/limited.log" "error: cannot write '$work/run/(best|last)\.safetensors': File too large"
    cmp "$work/last.before" "$work/run/last.safetensors" || fail "last.safetensors changed"
    loads "$work/run/last.safetensors" || fail "last.safetensors does not load"
    [ "$(ls "$work/run" | grep -c '\.tmp\.')" = 0 ] || fail "a temporary was left: $(ls "$work/run")"
    "$train" --resume "$work/run" --set train.max_steps=20 > "$work/resumed.log" 2>&1 || fail "resume without the limit"
    echo "ok: exit 1 naming the file, last.safetensors unchanged and loads; resumed to step 20 without the limit"
    ;;
  full_disk)
    # Room for best + last (2 x 1.15 MB), not for a third copy: the second improving evaluation's
    # best.safetensors temporary runs out of space.
    mount_tmpfs 3000k
    start_run "$mnt/run" > "$work/full.log" 2>&1
    rc=$?
    [ $rc = 1 ] || { cat "$work/full.log"; fail "expected exit 1 on a full filesystem, got $rc"; }
    expect_write_error "$work/full.log" "error: cannot (write|append to) '$mnt/run/[a-z.]+':.*No space left on device"
    loads "$mnt/run/last.safetensors" || fail "last.safetensors does not load"
    [ "$(ls "$mnt/run" | grep -c '\.tmp\.')" = 0 ] || fail "a temporary was left: $(ls "$mnt/run")"
    mount -o remount,size=64m "$mnt" || fail "cannot grow the tmpfs"
    "$train" --resume "$mnt/run" > "$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; fail "resume"; }
    start_run "$work/reference" > /dev/null 2>&1 || fail "reference run"
    records "$mnt/run" | diff <(records "$work/reference") - > "$work/diff" || { head "$work/diff"; fail "resumed losses differ"; }
    echo "ok: exit 1 naming the file, last.safetensors loads; with space again the run resumed to the reference's losses"
    ;;
  read_only_dir)
    mount_tmpfs 64m
    "$train" --config "$tiny" "${run_args[@]}" --run-dir "$mnt/run" --set train.max_steps=100000 \
      --set train.epochs=100000 > "$work/ro.log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do [ -e "$mnt/run/last.safetensors" ] && break; sleep 0.05; done
    [ -e "$mnt/run/last.safetensors" ] || { kill -9 $pid; fail "no checkpoint after 10 s"; }
    # A remount fails (EBUSY) while a file is open for writing: retry until it lands between writes.
    for _ in $(seq 100); do mount -o remount,ro "$mnt" 2> /dev/null && break; sleep 0.01; done
    findmnt -n -o OPTIONS "$mnt" | grep -q '^ro' || { kill -9 $pid; fail "could not remount read-only"; }
    wait $pid; rc=$?
    [ $rc = 1 ] || { cat "$work/ro.log"; fail "expected exit 1 on a read-only directory, got $rc"; }
    expect_write_error "$work/ro.log" "error: cannot (write|append to) '$mnt/run/[a-z.]+':.*Read-only file system"
    loads "$mnt/run/last.safetensors" || fail "last.safetensors does not load"
    echo "ok: exit 1 naming the file, last.safetensors loads"
    ;;
  *) fail "unknown case $case" ;;
esac
echo "PASS: $case"
