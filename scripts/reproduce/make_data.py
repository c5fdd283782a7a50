#!/usr/bin/env python3
"""Generated data for the ci-scale reproductions: small, deterministic (fixed seed), learnable, not trivial.

    make_data.py classify FILE     sentences "LABEL words" (the sent-conv-torch format of MR/SUBJ/CR/MPQA):
                                   the label is whether positive cue words outnumber negative ones, 5% of
                                   the labels flipped, so the best accuracy is about 95%
    make_data.py words DIR         DIR/{train,valid,test}.txt, one sentence a line (the PTB format, with
                                   <unk>): sentences of a small stochastic grammar with agreement, so the
                                   perplexity has a floor well below the vocabulary size
Standard library only; the same files on every machine and Python 3 version (random.Random with a seed).
"""
import os
import random
import sys


def classify(path, n=1200, seed=13):
    rng = random.Random(seed)
    filler = ["w%d" % i for i in range(150)]
    positive = ["good%d" % i for i in range(20)]
    negative = ["bad%d" % i for i in range(20)]
    with open(path, "w") as f:
        for _ in range(n):
            pos, neg = rng.randint(0, 3), rng.randint(0, 3)
            if pos == neg:
                pos += 1
            words = [rng.choice(filler) for _ in range(rng.randint(3, 14))]
            words += [rng.choice(positive) for _ in range(pos)] + [rng.choice(negative) for _ in range(neg)]
            rng.shuffle(words)
            label = int(pos > neg)
            if rng.random() < 0.05:
                label = 1 - label
            f.write("%d %s\n" % (label, " ".join(words)))


def words(directory, seed=17):
    rng = random.Random(seed)
    nouns = {"sg": ["n%d" % i for i in range(60)], "pl": ["ns%d" % i for i in range(60)]}
    verbs = {"sg": ["v%ds" % i for i in range(40)], "pl": ["v%d" % i for i in range(40)]}
    adjectives = ["a%d" % i for i in range(40)]
    rare = ["r%d" % i for i in range(400)]  # seen rarely: mapped to <unk> like PTB's long tail

    def noun_phrase(number):
        words = [rng.choice(["the", "a"] if number == "sg" else ["the", "some", "many"])]
        while rng.random() < 0.4:
            words.append(rng.choice(adjectives))
        words.append(rng.choice(nouns[number]) if rng.random() > 0.05 else "<unk>")
        return words

    def sentence():
        number = rng.choice(["sg", "pl"])
        words = noun_phrase(number) + [rng.choice(verbs[number])]
        if rng.random() < 0.7:
            words += noun_phrase(rng.choice(["sg", "pl"]))
        if rng.random() < 0.3:
            words += ["because"] + sentence()
        return words

    os.makedirs(directory, exist_ok=True)
    for split, count in (("train", 6000), ("valid", 600), ("test", 600)):
        with open(os.path.join(directory, split + ".txt"), "w") as f:
            for _ in range(count):
                s = sentence()
                if split == "train" and rng.random() < 0.02:
                    s[rng.randrange(len(s))] = rng.choice(rare)
                f.write(" " + " ".join(s) + " \n")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("classify", "words"):
        sys.exit(__doc__)
    (classify if sys.argv[1] == "classify" else words)(sys.argv[2])


if __name__ == "__main__":
    main()
