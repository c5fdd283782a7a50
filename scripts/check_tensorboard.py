#!/usr/bin/env python3
"""Checks srutrain's TensorBoard events files (src/train/tensorboard.h) with TensorBoard's own reader.

    check_tensorboard.py BUILD_DIR [--keep DIR]

Trains the tiny char-LM of tests/data/tiny.yaml (eval every 4 steps) three ways and reads each run
directory with tensorboard's EventAccumulator (every event kept, size_guidance 0):
  plain    12 steps in one go, then resumed with nothing left to train (no second events file, and
           its final evaluations, equal to the first's, not logged again at step 12);
  resumed  6 steps, resumed to 12; then last.safetensors is put back to its step-6 copy and the run
           resumed to 12 again, as after a crash that lost the later checkpoint: metrics.jsonl holds
           steps 7-12 twice, and the second resume's SessionLog START must make the reader drop the
           first resume's events of those steps;
  restart  12 steps; its checkpoints deleted (an attempt killed before it saved one), then the same run
           started afresh in that directory: the second file's SessionLog START at step 0 must make
           the reader drop the first attempt's events;
  classify the tiny classifier (tests/data/classify_tiny.yaml): other metrics (accuracy).
Each must give: every number of every metrics.jsonl line as a scalar - "train/KEY" for training lines,
"SPLIT/KEY" for evaluations (their "eval" object's keys and "epoch") - at the line's step, and the final
evaluations of the summary.json each srutrain process wrote - "final/SPLIT/KEY", "best/SPLIT/KEY" and
"best/step" - at its last step, equal to the float32 of the logged value (TensorBoard's simple_value is a
float); no other scalar; one event per (tag, step) after the reader's purge; for a (tag, step) logged
twice, the later value.

tensorboard==%s is used if importable, else installed with pip into BUILD_DIR/python-tensorboard
(pip's --target, so neither the system's Python nor a PEP 668 "externally managed" one is touched).
When pip cannot install it (no pip, no network), the check prints why and exits 77, which CTest reports
as SKIPPED (SKIP_RETURN_CODE). Any difference exits 1.
"""
import argparse
import importlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from pip_target import import_pinned

TENSORBOARD_VERSION = "2.21.0"
SKIP = 77
__doc__ = __doc__ % TENSORBOARD_VERSION


def import_event_accumulator(target):
    """tensorboard's EventAccumulator class, installing the package into `target` if needed; None and a
    reason when that is impossible."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    def load():
        module = importlib.import_module("tensorboard.backend.event_processing.event_accumulator")
        version = importlib.import_module("tensorboard.version").VERSION
        return module.EventAccumulator if version == TENSORBOARD_VERSION else None
    return import_pinned("tensorboard", TENSORBOARD_VERSION, target, load)


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def summary_scalars(summary):
    """[(tag, step, value)] of one summary.json's final evaluations, as srutrain maps them."""
    out = []
    groups = [("final", summary.get("final") or {})]
    best = summary.get("best")
    if isinstance(best, dict):
        out.append(("best/step", summary["steps"], best["step"]))
        groups.append(("best", best))
    for prefix, per_split in groups:
        for split, metrics in per_split.items():
            if isinstance(metrics, dict):
                out += [("%s/%s/%s" % (prefix, split, k), summary["steps"], v) for k, v in metrics.items() if is_number(v)]
    return out


def expected_scalars(run_dir, summaries):
    """{(tag, step): value} from metrics.jsonl and the summary.json of each process (in the order they
    ran), the later value of a (tag, step) winning, as srutrain maps them."""
    out = {}
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        r = json.loads(line)
        prefix = r["split"] if isinstance(r.get("split"), str) else "train"
        numbers = [(k, v) for k, v in r.items() if k != "step"]
        if isinstance(r.get("eval"), dict):
            numbers += list(r["eval"].items())
        for k, v in numbers:
            if is_number(v):
                out[(prefix + "/" + k, r["step"])] = as_float32(float(v))
    for summary in summaries:
        for tag, step, v in summary_scalars(summary):
            out[(tag, step)] = as_float32(float(v))
    return out


def compare(name, run_dir, summaries, EventAccumulator):
    events = [f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents.")]
    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    got, dup = {}, []
    for tag in acc.Tags()["scalars"]:
        for e in acc.Scalars(tag):
            if (tag, e.step) in got:
                dup.append((tag, e.step))
            got[(tag, e.step)] = e.value
    want = expected_scalars(run_dir, summaries)
    errors = []
    if dup:
        errors.append("%d (tag, step) pairs more than once, e.g. %s" % (len(dup), dup[:3]))
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    if missing:
        errors.append("%d scalars of metrics.jsonl / summary.json missing, e.g. %s" % (len(missing), missing[:3]))
    if extra:
        errors.append("%d scalars not in metrics.jsonl / summary.json, e.g. %s" % (len(extra), extra[:3]))
    differ = [(k, want[k], got[k]) for k in want if k in got and got[k] != want[k]]
    if differ:
        errors.append("%d values differ, e.g. %s" % (len(differ), differ[:3]))
    tags = sorted({t for t, _ in want})
    print("%-8s %d events file(s), %d scalars in %d tags (%s), %d steps: %s" % (
        name, len(events), len(want), len(tags), ", ".join(tags), len({s for _, s in want}),
        "; ".join(errors) if errors else "equal to metrics.jsonl and summary.json"))
    return not errors and len(want) > 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build_dir")
    ap.add_argument("--keep", help="write the run directories here (kept) instead of a temporary directory")
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    EventAccumulator, reason = import_event_accumulator(os.path.join(build, "python-tensorboard"))
    if EventAccumulator is None:
        print("SKIPPED: " + reason)
        return SKIP
    work = args.keep or tempfile.mkdtemp(prefix="sru-tb-")
    os.makedirs(work, exist_ok=True)
    train = os.path.join(build, "srutrain")
    tiny = [train, "--config", os.path.join(src, "tests/data/tiny.yaml"),
            "--set", "data.path=" + os.path.join(src, "data/enwik8-sample/enwik8.head1M"), "--set", "eval.every_steps=4"]

    summaries = {}  # run directory -> the summary.json of each srutrain process, in order

    def run(cmd):
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            sys.exit("FAIL: %s\n%s" % (" ".join(cmd), proc.stdout[-3000:]))
        run_dir = cmd[cmd.index("--run-dir" if "--run-dir" in cmd else "--resume") + 1]
        with open(os.path.join(run_dir, "summary.json")) as f:
            summaries.setdefault(run_dir, []).append(json.load(f))

    try:
        plain, resumed, restart, classify = (os.path.join(work, n) for n in ("plain", "resumed", "restart", "classify"))
        run(tiny + ["--run-dir", plain])
        run([train, "--resume", plain])  # finished: nothing to train, and its evaluations must not log twice
        run(tiny + ["--run-dir", restart])
        for f in os.listdir(restart):
            if f.endswith(".safetensors"):
                os.remove(os.path.join(restart, f))
        run(tiny + ["--run-dir", restart])
        run(tiny + ["--run-dir", resumed, "--set", "train.max_steps=6"])
        shutil.copy(os.path.join(resumed, "last.safetensors"), os.path.join(work, "step6.safetensors"))
        run([train, "--resume", resumed, "--set", "train.max_steps=12"])
        shutil.copy(os.path.join(work, "step6.safetensors"), os.path.join(resumed, "last.safetensors"))
        run([train, "--resume", resumed, "--set", "train.max_steps=12"])
        sentences = os.path.join(work, "sentences.txt")
        with open(sentences, "w") as f:
            for i in range(300):
                label = (i * 7) % 2
                words = " ".join("w%d" % ((i * 13 + j * 5) % 15) for j in range(1 + i % 6))
                f.write("%d %s %s\n" % (label, words, "yes" if label else "no"))
        run([train, "--config", os.path.join(src, "tests/data/classify_tiny.yaml"), "--set", "data.path=" + sentences,
             "--set", "data.fold=0", "--run-dir", classify])
        ok = [compare(name, d, summaries[d], EventAccumulator)
              for name, d in (("plain", plain), ("resumed", resumed), ("restart", restart), ("classify", classify))]
        for run_dir, expected in ((plain, 1), (resumed, 3), (restart, 2)):
            n_files = len([f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents.")])
            if n_files != expected:
                print("FAIL: %s holds %d events files, expected %d (one per process)" % (run_dir, n_files, expected))
                ok.append(False)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if not all(ok):
        print("FAIL")
        return 1
    print("ok: TensorBoard reads every metrics.jsonl and summary.json number back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
