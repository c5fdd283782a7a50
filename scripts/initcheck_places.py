#!/usr/bin/env python3
"""Places the addresses of compute-sanitizer's errors in the buffers a program printed.

usage: initcheck_places.py PROGRAM_STDOUT SANITIZER_LOG [--allow KERNEL]

PROGRAM_STDOUT holds lines `range NAME 0xBEGIN 0xEND` (tests/tools/cuda_library_probe.cpp prints them;
a name may repeat, e.g. per layer); SANITIZER_LOG is compute-sanitizer's output. Prints, per kernel, how
many errors fell in each named buffer, and for addresses in none of them their span (the buffers a
library allocates for itself, such as cuDNN's workspace, are among those).
--allow KERNEL: exit 1 unless the log has compute-sanitizer's ERROR SUMMARY, every error it counts was
placed (one `Address` line each), and every one is a read by KERNEL (a name prefix) outside every printed
buffer: what initcheck reports inside cuDNN's LSTM on Hopper, whose workspace its tensor-core GEMMs
write in a way initcheck does not see (docs/gpu-notes.md, "Two defects found on the card").
"""
import collections
import re
import sys


def main():
    args = sys.argv[1:]
    allow = None
    if len(args) == 4 and args[2] == "--allow":
        allow = args[3]
        args = args[:2]
    if len(args) != 2:
        sys.exit(__doc__)
    ranges = []
    with open(args[0]) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "range":
                ranges.append((parts[1], int(parts[2], 16), int(parts[3], 16)))
    counts = collections.Counter()
    outside = collections.defaultdict(list)
    kernel = "?"
    summary = None
    with open(args[1], errors="replace") as f:
        for line in f:
            m = re.search(r"ERROR SUMMARY: (\d+) error", line)
            if m:
                summary = int(m.group(1))
            m = re.search(r"=========\s+at (.*?)(\+0x[0-9a-f]+)?( in .*)?$", line)
            if m and "Uninitialized" not in line and kernel == "?":
                kernel = m.group(1).split("<")[0].split("(")[0].strip()
            if "Uninitialized" in line or "Invalid" in line:
                kernel = "?"
            m = re.search(r"Address (0x[0-9a-f]+)", line)
            if not m:
                continue
            addr = int(m.group(1), 16)
            name = next((n for n, b, e in ranges if b <= addr < e), None)
            if name is None:
                outside[kernel].append(addr)
                name = "(none of the printed buffers)"
            counts[(kernel, name)] += 1
    if not counts:
        print("no error addresses in", args[1])
    for (k, name), n in sorted(counts.items()):
        print(f"{n:8d}  {k}  {name}")
    for k, addrs in outside.items():
        print(f"outside the printed buffers in {k}: {len(addrs)} reads, 0x{min(addrs):x} .. 0x{max(addrs):x}, "
              f"{len(set(a >> 12 for a in addrs))} distinct 4 KiB pages")
    if allow is not None:
        unexpected = sum(n for (k, name), n in counts.items()
                         if not (k.split()[-1].startswith(allow) and name.startswith("(none")))
        placed = sum(counts.values())
        print(f"errors other than {allow}'s reads outside the printed buffers: {unexpected}; "
              f"ERROR SUMMARY {summary}, placed {placed}")
        sys.exit(1 if unexpected or summary is None or summary != placed else 0)


if __name__ == "__main__":
    main()
