#!/usr/bin/env python3
"""Joins consecutive pairs of a parallel corpus into longer ones, so that sentence lengths spread as a
WMT news corpus's do (WMT14 En-De: ~23 words a sentence, a tail past 100) where only a short-sentence
corpus is at hand (Multi30k: ~12): for `srubench batch-shapes`, which counts the batch shapes and the
padding a length distribution gives (docs/results.md, "Batch shapes of long sentences"). Each output
pair joins 1 + floor(E) input pairs, E exponential with mean --extra; --passes walks the corpus again
with new draws (more pairs, as a larger corpus has). Deterministic for a --seed. Plain or .gz input.

    scripts/long_pairs.py SRC TGT OUT_SRC OUT_TGT [--extra 1.2] [--passes 10] [--seed 1]
"""
import argparse
import gzip
import math
import random


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("tgt")
    ap.add_argument("out_src")
    ap.add_argument("out_tgt")
    ap.add_argument("--extra", type=float, default=1.2, help="mean number of further pairs joined to each")
    ap.add_argument("--passes", type=int, default=10, help="walks over the corpus")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    src, tgt = read_lines(a.src), read_lines(a.tgt)
    if len(src) != len(tgt):
        raise SystemExit(f"{a.src} has {len(src)} lines but {a.tgt} has {len(tgt)}")
    rng = random.Random(a.seed)
    with open(a.out_src, "w", encoding="utf-8") as fs, open(a.out_tgt, "w", encoding="utf-8") as ft:
        for _ in range(a.passes):
            i = 0
            while i < len(src):
                n = 1 + math.floor(rng.expovariate(1.0 / a.extra)) if a.extra > 0 else 1
                fs.write(" ".join(src[i:i + n]) + "\n")
                ft.write(" ".join(tgt[i:i + n]) + "\n")
                i += n


if __name__ == "__main__":
    main()
