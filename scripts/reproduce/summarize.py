#!/usr/bin/env python3
"""The JSON summary of one reproduction run, from its run directory.

    summarize.py RUN_DIR --experiment NAME --run NAME --scale paper|ci|machine --config FILE --out FILE.json
                 [-- OVERRIDES...]

Reads RUN_DIR/summary.json (a training run), RUN_DIR/cv_summary.json (cross-validation) or, for a run
that was stopped before it finished, the evaluations in RUN_DIR/metrics.jsonl (then "stopped" says so).
Writes: the metrics of the best checkpoint per split ("test.bpc", "valid.f1", "test.accuracy_std", ...),
the task's metric and its direction, wall time, training throughput, seconds per epoch, parameters,
the sha256 of the resolved config.yaml, the commit, the machine (CPU, cores, GPU, OPENBLAS_CORETYPE)
and the date. Standard library only.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import subprocess
import sys


def machine():
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    gpu = ""
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().replace("\n", ", ")
    except (OSError, subprocess.SubprocessError):
        pass
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "gpu": gpu or None,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE") or None}


def flatten(per_split, suffix=""):
    out = {}
    for split, values in per_split.items():
        if isinstance(values, dict):
            for key, value in values.items():
                if isinstance(value, (int, float)):
                    out["%s.%s%s" % (split, key, suffix)] = value
    return out


def from_summary(s):
    best = s.get("best")
    metrics = flatten({k: v for k, v in (best or s["final"]).items() if isinstance(v, dict)})
    return {
        "task": s["task"], "metric": best["metric"] if best else None,
        "higher_is_better": best["higher_is_better"] if best else None, "metrics": metrics,
        "stopped": s["stopped"], "epochs": s["epochs"], "steps": s["steps"], "parameters": s["parameters"],
        "wall_time_s": s["wall_time_s"], "train_tokens_per_s": s["train_tokens_per_s"], "token": s["token"],
        "seconds_per_epoch": s["seconds_per_epoch"], "device": s["device"], "threads": s["threads"],
        "commit": s["commit"],
    }


def from_cv(s, run_dir):
    metrics = {}
    for key, value in s.items():
        for stat in ("_mean", "_std"):
            if key.endswith(stat) and "_" in key[:-len(stat)] and isinstance(value, (int, float)):
                split, metric = key[:-len(stat)].split("_", 1)
                if split not in ("train", "valid", "test"):
                    continue  # seconds_per_epoch_mean and the like
                metrics["%s.%s%s" % (split, metric, "" if stat == "_mean" else "_std")] = value
    folds = [json.load(open(os.path.join(run_dir, "fold-%d" % f["fold"], "summary.json")))
             if isinstance(f, dict) and "fold" in f else None for f in s.get("per_fold", [])]
    folds = [f for f in folds if f]
    first = folds[0] if folds else {}
    return {
        "task": s["task"], "metric": s["metric"], "higher_is_better": s["higher_is_better"], "metrics": metrics,
        "stopped": "%d of %d folds" % (s["folds_run"], s["folds"]), "epochs": first.get("epochs"),
        "steps": sum(f["steps"] for f in folds), "parameters": first.get("parameters"),
        "wall_time_s": sum(f["wall_time_s"] for f in folds),
        "train_tokens_per_s": sum(f["train_tokens_per_s"] for f in folds) / max(1, len(folds)),
        "token": first.get("token"), "seconds_per_epoch": s["seconds_per_epoch_mean"],
        "device": first.get("device"), "threads": first.get("threads"), "commit": s["commit"],
    }


def from_metrics_log(run_dir):
    """A run stopped before its end (no summary.json): the best evaluation logged so far."""
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
    evals = [r for r in rows if "eval" in r]
    if not evals:
        sys.exit("summarize.py: %s has no summary.json and no evaluation in metrics.jsonl" % run_dir)
    config = open(os.path.join(run_dir, "config.yaml")).read()
    metric = next((l.split(":", 1)[1].strip().strip('"') for l in config.splitlines()
                   if l.strip().startswith("metric:")), "")
    first_key = next(iter(evals[0]["eval"]))
    metric = metric or first_key
    higher = metric in ("accuracy", "f1", "exact_match")
    pick = max if higher else min
    best = pick(evals, key=lambda r: r["eval"][metric])
    steps = [r for r in rows if "ms_per_step" in r]
    task = next(l.split(":", 1)[1].strip().strip('"') for l in config.splitlines() if l.startswith("task:"))
    return {
        "task": task, "metric": metric, "higher_is_better": higher,
        "metrics": {"%s.%s" % (best["split"], k): v for k, v in best["eval"].items()},
        "stopped": "interrupted after epoch %g (no summary.json; best of %d evaluations in metrics.jsonl)"
                   % (evals[-1]["epoch"], len(evals)),
        "epochs": evals[-1]["epoch"], "steps": evals[-1]["step"], "parameters": None, "wall_time_s": None,
        "train_tokens_per_s": (sorted(r["tokens_per_s"] for r in steps)[len(steps) // 2] if steps else None),
        "token": "tokens", "seconds_per_epoch": None, "device": None,
        "threads": next((int(l.split(":", 1)[1]) for l in config.splitlines() if l.startswith("  threads:")), None),
        "commit": None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--scale", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", help="the commit of the binary, where the run directory does not say it")
    parser.add_argument("--log", help="the run's log (default RUN_DIR.log): parameters of an interrupted run")
    parser.add_argument("--source", help="a note on where an interrupted or recorded run came from")
    argv = sys.argv[1:]
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    a = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    d = a.run_dir
    if os.path.exists(os.path.join(d, "summary.json")):
        summary = from_summary(json.load(open(os.path.join(d, "summary.json"))))
    elif os.path.exists(os.path.join(d, "cv_summary.json")):
        summary = from_cv(json.load(open(os.path.join(d, "cv_summary.json"))), d)
    elif os.path.exists(os.path.join(d, "metrics.jsonl")):
        summary = from_metrics_log(d)
    else:
        sys.exit("summarize.py: %s is not a run directory (no summary.json, cv_summary.json or metrics.jsonl)" % d)
    resolved = open(os.path.join(d, "config.yaml"), "rb").read()
    log = a.log or d.rstrip("/") + ".log"
    if summary["parameters"] is None and os.path.exists(log):
        found = re.search(r" model: (\d+) parameters;", open(log, errors="replace").read())
        summary["parameters"] = int(found.group(1)) if found else None
    summary["commit"] = summary["commit"] or a.commit
    if a.source:
        summary["source"] = a.source
    if not summary["commit"]:
        try:
            summary["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                               text=True).stdout.strip() or None
        except OSError:
            pass
    result = {"experiment": a.experiment, "run": a.run, "scale": a.scale, "config": a.config,
              "overrides": [o for o in overrides if o != "--set"],
              "config_sha256": hashlib.sha256(resolved).hexdigest()}
    result.update(summary)
    result["machine"] = machine()
    result["date"] = datetime.date.today().isoformat()
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(tmp, a.out)
    if summary["metric"]:
        keys = sorted(k for k in summary["metrics"] if k.endswith("." + summary["metric"]))
        print("   %s/%s: %s" % (a.experiment, a.run, ", ".join("%s %.4f" % (k, summary["metrics"][k]) for k in keys)))


if __name__ == "__main__":
    main()
