#!/usr/bin/env python3
"""Where a GPU training step's time goes, from Nsight Compute's per-kernel CSV.

    ncu_kernel_table.py NCU.csv [--steps N] [--step-ms MS] [--top K]

NCU.csv: `ncu --csv --print-units base --print-kernel-base function --log-file NCU.csv --metrics
gpu__time_duration.sum,dram__bytes.sum PROGRAM ...` (scripts/gpu_lease.sh runs it over a few steps of
srubench train-epoch). Groups the kernels by name and prints, busiest first: launches, milliseconds in
all, per step (--steps: how many steps the profile covered), share of the kernels' time, DRAM bytes
and their rate (GB/s, against ~4 TB/s for an H200's copy). With --step-ms (the step's time measured
without the profiler), the last line says how much of the step no kernel accounts for: host time
the GPU waited through (launches, the autograd walk, allocation).

The CSV has one row per (kernel launch, metric) with the columns "ID", "Kernel Name", "Metric Name",
"Metric Unit", "Metric Value"; units are converted whatever ncu prints (ns / nsecond / us / ms; byte /
Kbyte / Mbyte / Gbyte, powers of 1000), and numbers may carry thousands separators. Lines before the
header (==PROF== messages) are skipped.
"""
import argparse
import csv
import io
import sys
from collections import defaultdict

TIME_NS = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
BYTES = {"byte": 1, "b": 1, "kbyte": 1e3, "kb": 1e3, "mbyte": 1e6, "mb": 1e6, "gbyte": 1e9, "gb": 1e9,
         "tbyte": 1e12, "tb": 1e12}


def number(text):
    return float(text.replace(",", ""))


def read_launches(path):
    """{(process id, launch id): {"name", "ns", "bytes"}} from an ncu CSV file."""
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit("ncu_kernel_table.py: %s holds no ncu CSV table (no \"ID\" header line)" % path)
    launches = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not row.get("ID") or row.get("Metric Value") in (None, "", "n/a"):
            continue
        # A profile over several processes (a shell loop under ncu) may number each one's launches anew.
        key = (row.get("Process ID", ""), row["ID"])
        launch = launches.setdefault(key, {"name": row["Kernel Name"], "ns": 0.0, "bytes": 0.0})
        unit = (row.get("Metric Unit") or "").strip().lower()
        value = number(row["Metric Value"])
        if row["Metric Name"].startswith("gpu__time_duration"):
            if unit not in TIME_NS:
                sys.exit("ncu_kernel_table.py: unknown time unit %r" % unit)
            launch["ns"] += value * TIME_NS[unit]
        elif row["Metric Name"].startswith("dram__bytes"):
            if unit not in BYTES:
                sys.exit("ncu_kernel_table.py: unknown byte unit %r" % unit)
            launch["bytes"] += value * BYTES[unit]
    return launches


def table(launches, steps, step_ms, top):
    by_name = defaultdict(lambda: [0, 0.0, 0.0])
    for launch in launches.values():
        entry = by_name[launch["name"]]
        entry[0] += 1
        entry[1] += launch["ns"]
        entry[2] += launch["bytes"]
    total_ns = sum(e[1] for e in by_name.values())
    out = ["| kernel | launches | ms | ms/step | share | MB/step | GB/s |", "|---|---|---|---|---|---|---|"]
    rows = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    for name, (count, ns, nbytes) in rows[:top]:
        out.append("| %s | %d | %.3f | %.3f | %.1f%% | %.1f | %.0f |" % (
            name, count, ns / 1e6, ns / 1e6 / steps, 100 * ns / total_ns if total_ns else 0,
            nbytes / 1e6 / steps, nbytes / ns if ns else 0))
    if len(rows) > top:
        rest = rows[top:]
        ns = sum(e[1] for _, e in rest)
        out.append("| (%d more kernels) | %d | %.3f | %.3f | %.1f%% | %.1f | |" % (
            len(rest), sum(e[0] for _, e in rest), ns / 1e6, ns / 1e6 / steps, 100 * ns / total_ns if total_ns else 0,
            sum(e[2] for _, e in rest) / 1e6 / steps))
    kernel_ms = total_ns / 1e6 / steps
    out.append("kernels: %d launches, %.3f ms per step (%d step%s profiled)" % (
        len(launches), kernel_ms, steps, "" if steps == 1 else "s"))
    if step_ms:
        out.append("step: %.3f ms measured; %.3f ms (%.0f%%) with no kernel running" % (
            step_ms, step_ms - kernel_ms, 100 * (step_ms - kernel_ms) / step_ms))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1, help="training steps the profile covers")
    ap.add_argument("--step-ms", type=float, default=0.0, help="a step's time measured without the profiler")
    ap.add_argument("--top", type=int, default=25, help="kernels listed by name (the rest on one line)")
    a = ap.parse_args()
    if a.steps < 1 or a.top < 1:
        ap.error("--steps and --top must be positive")
    launches = read_launches(a.csv)
    if not launches:
        sys.exit("ncu_kernel_table.py: %s lists no kernel launch" % a.csv)
    print(table(launches, a.steps, a.step_ms, a.top))


if __name__ == "__main__":
    main()
