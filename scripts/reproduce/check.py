#!/usr/bin/env python3
"""Fails when a reproduction got worse: compares run summaries with the thresholds kept in the repository.

    check.py THRESHOLDS.json OUT_DIR

THRESHOLDS.json maps "experiment/run" to {metric: {"max" or "min": bound, "measured": value, "from": how it
was measured}}, e.g. {"charlm/sru": {"test.bpc": {"max": 2.95, "measured": 2.71, "from": "..."}}}. Every
listed run must have its summary OUT_DIR/experiment/run.json (written by summarize.py). Prints one line per
check and exits 1 if any metric is worse than its threshold or any summary is missing.
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    thresholds_path, out = sys.argv[1], sys.argv[2]
    thresholds = json.load(open(thresholds_path))
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
                print("FAIL %s: %s = %.4f is worse than the threshold: %s %.4f (set from %s)"
                      % (run, metric, value, "at most" if kind == "max" else "at least", limit, where))
                failures += 1
            else:
                print("ok   %s: %s = %.4f (threshold: %s %.4f)" % (run, metric, value, kind, limit))
    if failures:
        print("%d reproduction check(s) failed against %s" % (failures, thresholds_path))
        sys.exit(1)


if __name__ == "__main__":
    main()
