#!/usr/bin/env python3
"""Reads a srubench --json file back and checks its rows, so a benchmark smoke test fails when the rows
are missing, misnamed or nonsense (not only when the program crashes).

    check_bench_json.py FILE BENCH IMPL[,IMPL...] [KEY=VALUE ...]

FILE must hold {"bench": BENCH, "rows": [...]}: one row per IMPL in that order, each on the CPU with a
positive finite "ms" and every other number finite and non-negative; KEY=VALUE (e.g. L=4 B=2) must hold
in every row. Prints the rows checked.
"""
import json
import math
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, bench, impls = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    fixed = dict(kv.split("=", 1) for kv in sys.argv[4:])
    doc = json.load(open(path))
    assert doc.get("bench") == bench, "bench is %r, expected %r" % (doc.get("bench"), bench)
    rows = doc["rows"]
    assert [r.get("impl") for r in rows] == impls, "impls %s, expected %s" % ([r.get("impl") for r in rows], impls)
    for r in rows:
        assert r.get("device") == "cpu", r
        assert isinstance(r.get("ms"), (int, float)) and 0 < r["ms"] < math.inf, "ms of %s: %r" % (r["impl"], r.get("ms"))
        for key, value in r.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert math.isfinite(value) and value >= 0, "%s of %s: %r" % (key, r["impl"], value)
        for key, value in fixed.items():
            assert str(r.get(key)) == value, "%s of %s is %r, expected %s" % (key, r["impl"], r.get(key), value)
    print("ok: %d %s rows (%s)" % (len(rows), bench, ", ".join(impls)))


if __name__ == "__main__":
    main()
