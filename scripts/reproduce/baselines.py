#!/usr/bin/env python3
"""Trivial n-gram baselines of a language-model run, on the same split its metric is measured on.

    baselines.py RUN_DIR [SPLIT]        prints {"metric", "split", "unigram", "bigram"} as JSON

A model that does not beat these has learnt nothing a count table would not: check.py requires every
threshold on bpc or ppl to beat the better of them by a stated margin. Reads the run's resolved
config.yaml (written by srutrain) for the task and the data files, and splits the data as the task
does: charlm one byte file cut by data.valid_fraction / data.test_fraction (train, valid, then test at
its end), wordlm three files of whitespace-separated words with an <eos> per line.
- unigram: add-one counts of the training tokens (over the 256 byte values, or the training words);
- bigram: p(b | a) = lambda c(a, b) / c(a) + (1 - lambda) unigram(b), lambda tuned on the validation
  split from 0.05 to 0.99 (the best for the split that is then scored).
Standard library only (plain files; the ci data are plain).
"""
import collections
import json
import math
import os
import sys


def read_config(run_dir):
    """The two-level YAML srutrain writes (scalars as JSON): {section: {key: value}} and top-level keys."""
    config, section = {}, None
    for line in open(os.path.join(run_dir, "config.yaml"), encoding="utf-8"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if not line.startswith(" "):
            if value:
                config[key] = json.loads(value)
            else:
                section = config.setdefault(key, {})
        elif section is not None and value:
            try:
                section[key] = json.loads(value)
            except ValueError:
                section[key] = value
    return config


def char_splits(config):
    data = open(config["data"]["path"], "rb").read()
    n = len(data)
    n_test = int(n * config["data"].get("test_fraction", 0.05))
    n_valid = int(n * config["data"].get("valid_fraction", 0.05))
    n_train = n - n_valid - n_test
    return list(data[:n_train]), list(data[n_train:n_train + n_valid]), list(data[n_train + n_valid:]), 256


def word_splits(config):
    def words(path):
        out = []
        for line in open(path, encoding="utf-8"):
            out += line.split() + ["<eos>"]
        return out
    train = words(config["data"]["path"])
    vocab = set(train)
    fix = lambda ws: [w if w in vocab else "<unk>" for w in ws]
    return train, fix(words(config["data"]["valid_path"])), fix(words(config["data"]["test_path"])), len(vocab | {"<unk>"})


def cross_entropies(train, held_out, vocabulary_size, lambdas):
    """Mean nats per token of `held_out` under the unigram and under the bigram for each lambda."""
    unigram_counts = collections.Counter(train)
    total = len(train) + vocabulary_size
    unigram = lambda t: (unigram_counts[t] + 1) / total
    pair_counts = collections.Counter(zip(train, train[1:]))
    context_counts = collections.Counter(train[:-1])
    uni = -sum(math.log(unigram(t)) for t in held_out) / len(held_out)
    bi = {}
    for lam in lambdas:
        nats = 0.0
        for a, b in zip(held_out, held_out[1:]):
            c = context_counts[a]
            p = (lam * pair_counts[(a, b)] / c if c else 0.0) + (1 - lam) * unigram(b)
            nats -= math.log(p)
        bi[lam] = nats / (len(held_out) - 1)
    return uni, bi


def baselines(run_dir, split="test"):
    config = read_config(run_dir)
    task = config.get("task")
    if task == "charlm":
        train, valid, test, v = char_splits(config)
        metric, scale = "bpc", lambda nats: nats / math.log(2)
    elif task == "wordlm":
        train, valid, test, v = word_splits(config)
        metric, scale = "ppl", math.exp
    else:
        return None
    lambdas = [round(0.05 * i, 2) for i in range(1, 20)] + [0.97, 0.99]
    _, tuned = cross_entropies(train, valid, v, lambdas)
    best = min(tuned, key=tuned.get)
    uni, bi = cross_entropies(train, test if split == "test" else valid, v, [best])
    return {"metric": metric, "split": split, "unigram": scale(uni), "bigram": scale(bi[best]), "lambda": best}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    print(json.dumps(baselines(*sys.argv[1:]), indent=1))


if __name__ == "__main__":
    main()
