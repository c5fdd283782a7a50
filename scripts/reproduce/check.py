#!/usr/bin/env python3
"""Fails when a reproduction got worse: compares run summaries with the thresholds kept in the repository.

    check.py THRESHOLDS.json OUT_DIR

THRESHOLDS.json maps "experiment/run" to {metric: {"max" or "min": bound, "measured": value, "from": how it
was measured}}, e.g. {"charlm/sru": {"test.bpc": {"max": 2.95, "measured": 2.71, "from": "..."}}}. Every
listed run must have its summary OUT_DIR/experiment/run.json (written by summarize.py). Prints one line per
check and exits 1 if any metric is worse than its threshold or any summary is missing.

A threshold must also mean something: for a language model (bpc or ppl) the bound itself must beat the
better of the trivial unigram and bigram count models on the same split (baselines.py, computed from
the run directory's config.yaml) by the margin THRESHOLDS.json states under "_baseline_margins"
({"bpc": bits below, "ppl": fraction below}); a bound a count table would pass fails the check.
"""
import json
import os
import sys

from baselines import baselines


def check_against_baselines(run, metric, limit, run_dir, margins):
    """1 when the bound on a bpc/ppl metric does not beat the n-gram baselines by the margin, else 0."""
    split, _, name = metric.partition(".")
    if name not in margins or not os.path.exists(os.path.join(run_dir, "config.yaml")):
        return 0
    b = baselines(run_dir, split)
    if b is None or b["metric"] != name:
        return 0
    best = min(b["unigram"], b["bigram"])
    required = best - margins[name] if name == "bpc" else best * (1 - margins[name])
    text = "%s: the bound %.6g on %s against the %s baselines (unigram %.4g, bigram %.4g)" % (
        run, limit, metric, split, b["unigram"], b["bigram"])
    if limit > required:
        print("FAIL %s: a count table comes within the margin; the bound must be at most %.4g" % (text, required))
        return 1
    print("ok   %s: at most %.4g required" % (text, required))
    return 0


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    thresholds_path, out = sys.argv[1], sys.argv[2]
    thresholds = json.load(open(thresholds_path))
    margins = thresholds.get("_baseline_margins", {})
    failures = 0
    for run, checks in thresholds.items():
        if run.startswith("_"):
            continue  # comments
        path = os.path.join(out, run + ".json")
        if not os.path.exists(path):
            print("FAIL %s: no summary %s (the reproduction did not run or did not finish)" % (run, path))
            failures += 1
            continue
        metrics = json.load(open(path))["metrics"]
        for metric, bound in checks.items():
            value = metrics.get(metric)
            kind = "max" if "max" in bound else "min"
            limit = bound[kind]
            where = "%s in %s" % (bound.get("measured"), bound.get("from", "?"))
            if value is None:
                print("FAIL %s: %s is not in %s (it has: %s)" % (run, metric, path, ", ".join(sorted(metrics))))
                failures += 1
            elif value != value or (value > limit if kind == "max" else value < limit):
                print("FAIL %s: %s = %.6g is worse than the threshold: %s %.6g (set from %s)"
                      % (run, metric, value, "at most" if kind == "max" else "at least", limit, where))
                failures += 1
            else:
                print("ok   %s: %s = %.6g (threshold: %s %.6g)" % (run, metric, value, kind, limit))
            failures += check_against_baselines(run, metric, limit, os.path.join(out, run), margins)
    if failures:
        print("%d reproduction check(s) failed against %s" % (failures, thresholds_path))
        sys.exit(1)


if __name__ == "__main__":
    main()
