#!/usr/bin/env python3
"""Generated data for the ci-scale reproductions: small, deterministic (fixed seed), learnable, not trivial.

    make_data.py classify FILE     sentences "LABEL words" (the sent-conv-torch format of MR/SUBJ/CR/MPQA):
                                   the label is whether positive cue words outnumber negative ones, 5% of
                                   the labels flipped, so the best accuracy is about 95%
    make_data.py words DIR         DIR/{train,valid,test}.txt, one sentence a line (the PTB format, with
                                   <unk>): sentences of a small stochastic grammar with agreement, so the
                                   perplexity has a floor well below the vocabulary size
    make_data.py parallel DIR      DIR/{train,valid,test}.{en,de}, one sentence a line (the Multi30k format):
                                   English-like sentences and their "German" by fixed rules a model must
                                   learn: a lexicon, gendered articles and adjective endings agreeing with
                                   the noun, plural nouns, the verb second and the verb last in a
                                   subordinate clause, capitalised nouns; unique sentences, one reference
Standard library only; the same files on every machine and Python 3 version (random.Random with a seed).
Each file appears whole (written beside it, then renamed): ci.sh --jobs 2 runs two reproductions at once
that make and read the same files.
"""
import contextlib
import os
import random
import sys


@contextlib.contextmanager
def whole_file(path):
    """Opens a temporary beside PATH for writing and renames it to PATH when the block ends without error."""
    temporary = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(temporary, "w") as f:
            yield f
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def classify(path, n=1200, seed=13):
    rng = random.Random(seed)
    filler = ["w%d" % i for i in range(150)]
    positive = ["good%d" % i for i in range(20)]
    negative = ["bad%d" % i for i in range(20)]
    with whole_file(path) as f:
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
        with whole_file(os.path.join(directory, split + ".txt")) as f:
            for _ in range(count):
                s = sentence()
                if split == "train" and rng.random() < 0.02:
                    s[rng.randrange(len(s))] = rng.choice(rare)
                f.write(" " + " ".join(s) + " \n")


def parallel(directory, seed=19):
    rng = random.Random(seed)
    # (English singular, German stem, gender); German plurals add "en".
    nouns = [("n%d" % i, "nomen%d" % i, "mfn"[i % 3]) for i in range(80)]
    verbs = [("v%d" % i, "verb%d" % i) for i in range(40)]
    adjectives = [("a%d" % i, "adj%d" % i) for i in range(40)]
    adverbs = [("today", "heute"), ("often", "oft"), ("outside", "draussen")]
    articles = {"m": "der", "f": "die", "n": "das"}

    def noun_phrase():
        noun, stem, gender = rng.choice(nouns)
        plural = rng.random() < 0.35
        adjs = [rng.choice(adjectives) for _ in range(rng.choice([0, 0, 1, 1, 2]))]
        en = ["the"] + [a for a, _ in adjs] + [noun + ("s" if plural else "")]
        ending = "en" if plural else "e"
        de = ["die" if plural else articles[gender]] + [g + ending for _, g in adjs]
        de.append(stem.capitalize() + ("en" if plural else ""))
        return en, de, plural

    def clause(subordinate):
        subject_en, subject_de, plural = noun_phrase()
        verb, stem = rng.choice(verbs)
        verb_en, verb_de = verb + ("" if plural else "s"), stem + ("en" if plural else "t")
        object_en, object_de = [], []
        if rng.random() < 0.7:
            object_en, object_de, _ = noun_phrase()
        adverb_en, adverb_de = rng.choice(adverbs) if rng.random() < 0.3 else (None, None)
        en = subject_en + [verb_en] + object_en + ([adverb_en] if adverb_en else [])
        if subordinate:  # the verb goes last
            de = subject_de + ([adverb_de] if adverb_de else []) + object_de + [verb_de]
        elif adverb_de and rng.random() < 0.5:  # adverb first, the verb stays second
            de = [adverb_de.capitalize(), verb_de] + subject_de + object_de
        else:
            de = subject_de + [verb_de] + ([adverb_de] if adverb_de else []) + object_de
        return en, de

    def sentence():
        en, de = clause(False)
        if rng.random() < 0.3:
            sub_en, sub_de = clause(True)
            en, de = en + [",", "because"] + sub_en, de + [",", "weil"] + sub_de
        en[0] = en[0].capitalize()
        de[0] = de[0][0].upper() + de[0][1:]
        return " ".join(en) + " .", " ".join(de) + " ."

    os.makedirs(directory, exist_ok=True)
    seen = set()
    for split, count in (("train", 6000), ("valid", 300), ("test", 300)):
        with whole_file(os.path.join(directory, split + ".en")) as en, whole_file(os.path.join(directory, split + ".de")) as de:
            written = 0
            while written < count:
                s, t = sentence()
                if s in seen:  # the test sentences are unseen
                    continue
                seen.add(s)
                en.write(s + "\n")
                de.write(t + "\n")
                written += 1


def main():
    makers = {"classify": classify, "words": words, "parallel": parallel}
    if len(sys.argv) != 3 or sys.argv[1] not in makers:
        sys.exit(__doc__)
    makers[sys.argv[1]](sys.argv[2])


if __name__ == "__main__":
    main()
