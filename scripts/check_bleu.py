#!/usr/bin/env python3
"""Checks srutrain's BLEU (src/data/bleu.h) against the real sacreBLEU package, field by field.

    check_bleu.py BUILD_DIR [--cli PATH] [--lines N] [--seed S] [--keep DIR]

Generates N lines (default 3000) of reference text and perturbed hypotheses from a seed (dropped,
swapped, duplicated and replaced words, case changes, punctuation, numbers with "," and ".", quotes and
HTML entities, hyphens, "<skipped>", Unicode letters and spaces, empty lines, exact copies, truncations),
writes them as UTF-8 files, and scores them in four settings (1 reference; 1 lower-cased; 2 references;
3 references lower-cased) with both:
  - our tests/bleu_cli (BUILD_DIR/tests/bleu_cli, or --cli), which prints the corpus score, every line's
    statistics and score (each line as a one-line corpus) and every segment as tokenized;
  - sacrebleu's Python API (BLEU(lowercase=...).corpus_score on the lines as its CLI reads them, the same
    per line, BLEU._preprocess_segment for the tokens) and its command line (`python3 -m sacrebleu`).
Compared: score, precisions, bp to 1e-9 (absolute; the differences are reported, and are 0 so far),
counts, totals, sys_len, ref_len, signature, sacreBLEU's text line and every tokenized segment exactly.

sacrebleu==%s is used if importable, else installed with pip into BUILD_DIR/python-sacrebleu (pip's
--target, so neither the system's Python nor a PEP 668 "externally managed" one is touched). When pip
cannot install it (no pip, no network), the check prints why and exits 77, which CTest reports as
SKIPPED (SKIP_RETURN_CODE). Any difference exits 1.
"""
import argparse
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile

from pip_target import import_pinned

SACREBLEU_VERSION = "2.6.0"  # the version data/bleu.h reproduces (kSacrebleuVersion)
SKIP = 77
TOLERANCE = 1e-9
PYTHON_TARGET = None  # where pip installs sacrebleu (BUILD_DIR/python-sacrebleu), also given to its command line

__doc__ = __doc__ % SACREBLEU_VERSION


def import_sacrebleu(target):
    """The sacrebleu module of the pinned version, installing it into `target` if needed; None and a reason
    when that is impossible."""
    def load():
        module = importlib.import_module("sacrebleu")
        return module if getattr(module, "__version__", None) == SACREBLEU_VERSION else None
    return import_pinned("sacrebleu", SACREBLEU_VERSION, target, load)


# ---------------------------------------------------------------------------------------------------
# Text generation

WORDS = ("the a an of to and in is was it that for on with as by at from this be are not have has had "
         "man dog bit first house city report said year government people new time market price "
         "percent company minister police water school world week state group country").split()
NAMES = ["John", "Paris", "U.S.", "EU", "Dr.", "Mr.", "McDonald's", "O'Neil", "iPhone", "NATO", "e.g.", "i.e.",
         "St.", "Inc.", "a.m.", "Ph.D."]
UNICODE_WORDS = ["café", "naïve", "Ωmega", "ΣΟΦΟΣ", "ΟΔΟΣ", "σοφός", "İstanbul", "DİYARBAKIR", "straße", "STRASSE",
                 "ẞ", "ǅungla", "Ǉ", "Москва", "ПРАВДА", "東京", "中文。", "日本語、", "١٢٣", "٣.٤", "３．４",
                 "Ａｂｃ", "ﬁne", "Ꮎ", "ꭰ", "Ⅻ", "ⓐⒷ", "𝐁old", "😀", "e\u0301", "A\u030a", "İi̇", "ΣΑΣ.", "Σ"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + [
    "...", "--", "“", "”", "‘", "’", "—", "–", "…", "«", "»", "¿", "¡", "•", "€", "£", "°", "§"]
ENTITIES = ["&quot;", "&amp;", "&lt;", "&gt;", "&amp;quot;", "&amp;lt;", "&ampx;", "&", "&&", "R&D", "AT&amp;T"]
# Python whitespace, some of it Unicode; the last two are not whitespace for Python.
SPACES = [" ", " ", " ", " ", "  ", "\t", "\u00a0", "\u3000", "\u2009", "\u2028", "\u0085", "\x1c", "\x0b",
          "\x0c", "\r", "\u200b", "\ufeff"]
SOUP = list("0123456789.,-'\"&;<>/ aZ") + ["<skipped>", "-\n", "é", "Σ", "\u00a0", "٣"]


def number(rng):
    kind = rng.randrange(8)
    if kind == 0:
        return "%d,%03d" % (rng.randrange(1, 999), rng.randrange(1000))
    if kind == 1:
        return "%d.%d" % (rng.randrange(100), rng.randrange(100))
    if kind == 2:
        return "%d-%d" % (rng.randrange(100), rng.randrange(100))
    if kind == 3:
        return "$%d.%02d" % (rng.randrange(1000), rng.randrange(100))
    if kind == 4:
        return "%d%%" % rng.randrange(101)
    if kind == 5:
        return ".%d" % rng.randrange(100)
    if kind == 6:
        return "%d.%d.%d" % (rng.randrange(10), rng.randrange(10), rng.randrange(10))
    return str(rng.randrange(3000))


def token(rng):
    r = rng.random()
    if r < 0.55:
        w = rng.choice(WORDS)
    elif r < 0.63:
        w = rng.choice(NAMES)
    elif r < 0.73:
        w = rng.choice(UNICODE_WORDS)
    elif r < 0.83:
        w = number(rng)
    elif r < 0.88:
        w = rng.choice(ENTITIES)
    elif r < 0.93:
        w = rng.choice(WORDS) + "-" + rng.choice(WORDS + ["based", "known", "2"])
    elif r < 0.96:
        w = "".join(rng.choice(SOUP) for _ in range(rng.randrange(1, 6)))
    else:
        w = rng.choice(PUNCT)
    r = rng.random()
    if r < 0.12:
        w += rng.choice([",", ".", ";", ":", "!", "?", "'s", ")", "\"", ".\"", ",'", "-", "...", "&quot;"])
    elif r < 0.18:
        w = rng.choice(["(", "\"", "'", "“", "&quot;", "-", "<"]) + w
    if rng.random() < 0.01:
        w = "<skipped>" if rng.random() < 0.5 else w + "-\n"
    return w


def join(rng, words):
    out = ""
    for i, w in enumerate(words):
        if i > 0:
            out += " " if rng.random() < 0.9 else rng.choice(SPACES)
        out += w
    if rng.random() < 0.1:
        out = rng.choice(SPACES) + out
    if rng.random() < 0.1:
        out += rng.choice(SPACES + [" -", "-"])
    return out.replace("\n", " ")  # a line of a file holds no "\n"


def change_case(rng, w):
    return rng.choice([w.upper(), w.lower(), w.title(), w.swapcase(), w.capitalize()])


def perturb(rng, words):
    words = list(words)
    for _ in range(rng.randrange(0, 4)):
        if not words:
            break
        i = rng.randrange(len(words))
        op = rng.randrange(7)
        if op == 0:
            del words[i]
        elif op == 1 and i + 1 < len(words):
            words[i], words[i + 1] = words[i + 1], words[i]
        elif op == 2:
            words.insert(i, words[i])
        elif op == 3:
            words[i] = token(rng)
        elif op == 4:
            words[i] = change_case(rng, words[i])
        elif op == 5:
            words[i] = words[i] + rng.choice([",", ".", "!", "'", "\"", "-"])
        else:
            words.insert(i, token(rng))
    return words


def generate(rng, n, num_refs):
    """n lines of num_refs references and one hypothesis each."""
    refs = [[] for _ in range(num_refs)]
    hyps = []
    for _ in range(n):
        base = [token(rng) for _ in range(rng.randrange(0, 30))]
        if rng.random() < 0.3:
            base[0:1] = [change_case(rng, base[0])] if base else []
        for k in range(num_refs):
            words = base if k == 0 else perturb(rng, base)
            refs[k].append("" if rng.random() < 0.02 else join(rng, words))
        r = rng.random()
        if r < 0.05:
            hyp = ""
        elif r < 0.10:
            hyp = refs[0][-1]
        elif r < 0.15:
            hyp = join(rng, [token(rng) for _ in range(rng.randrange(1, 15))])
        elif r < 0.22:
            hyp = join(rng, base[: rng.randrange(0, len(base) + 1)])
        else:
            hyp = join(rng, perturb(rng, perturb(rng, base)))
        hyps.append(hyp)
    return hyps, refs


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="") as f:
        for line in lines:
            f.write(line + "\n")


# ---------------------------------------------------------------------------------------------------
# Comparison


class Comparison:
    def __init__(self):
        self.failures = []
        self.max_diff = 0.0
        self.scores = 0
        self.identical = 0

    def number(self, where, ours, theirs, exact=False):
        if exact:
            if ours != theirs or type(ours) is not type(theirs):
                self.failures.append("%s: ours %r, sacrebleu %r" % (where, ours, theirs))
            return
        diff = abs(float(ours) - float(theirs))
        self.max_diff = max(self.max_diff, diff)
        if not diff <= TOLERANCE:
            self.failures.append("%s: ours %r, sacrebleu %r (difference %g)" % (where, ours, theirs, diff))

    def score(self, where, ours, theirs):
        """A BLEUScore against our JSON object."""
        self.scores += 1
        self.identical += ours["score"] == theirs.score
        self.number(where + " score", ours["score"], theirs.score)
        self.number(where + " bp", ours["bp"], theirs.bp)
        for n, (a, b) in enumerate(zip(ours["precisions"], theirs.precisions)):
            self.number("%s precision %d" % (where, n + 1), a, b)
        for key in ("counts", "totals"):
            self.number(where + " " + key, ours[key], [int(x) for x in getattr(theirs, key)], exact=True)
        self.number(where + " sys_len", ours["sys_len"], int(theirs.sys_len), exact=True)
        self.number(where + " ref_len", ours["ref_len"], int(theirs.ref_len), exact=True)


def read_as_cli(sacrebleu, path):
    """The lines of `path` as the sacrebleu command line reads them."""
    from sacrebleu.utils import smart_open
    with smart_open(path) as f:
        return [line.rstrip() for line in f]


def check_setting(sacrebleu, cli, tmp, hyps, refs, lowercase, cmp):
    name = "%d ref%s%s" % (len(refs), "s" if len(refs) > 1 else "", ", lowercase" if lowercase else "")
    hyp_path = os.path.join(tmp, "hyp.txt")
    ref_paths = [os.path.join(tmp, "ref%d.txt" % k) for k in range(len(refs))]
    write_lines(hyp_path, hyps)
    for path, lines in zip(ref_paths, refs):
        write_lines(path, lines)

    cmd = [cli, "--hyp", hyp_path, "--lines", "--tokens"] + sum([["--ref", p] for p in ref_paths], [])
    if lowercase:
        cmd.append("--lowercase")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        cmp.failures.append("%s: bleu_cli failed: %s" % (name, proc.stderr.strip()))
        return
    ours = json.loads(proc.stdout)

    from sacrebleu.metrics import BLEU
    sys_lines = read_as_cli(sacrebleu, hyp_path)
    ref_lines = [read_as_cli(sacrebleu, p) for p in ref_paths]
    bleu = BLEU(lowercase=lowercase)
    theirs = bleu.corpus_score(sys_lines, ref_lines)
    signature = str(bleu.get_signature())
    cmp.score(name + ": corpus", ours, theirs)
    cmp.number(name + ": signature", ours["signature"], signature, exact=True)
    cmp.number(name + ": text", ours["text"], theirs.format(width=2, signature=signature), exact=True)

    # sacreBLEU's command line on the same files.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PYTHON_TARGET, os.environ.get("PYTHONPATH")])))
    sb_cmd = [sys.executable, "-m", "sacrebleu"] + ref_paths + ["-i", hyp_path, "-m", "bleu", "-f", "text", "-w", "2"]
    if lowercase:
        sb_cmd.append("-lc")
    sb = subprocess.run(sb_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    cmp.number(name + ": sacrebleu command line", ours["text"], sb.stdout.strip(), exact=True)

    # Every segment as tokenized, every line's statistics and score.
    for i, line in enumerate(sys_lines):
        cmp.number("%s: hypothesis line %d tokens" % (name, i + 1), ours["tokens"]["hyp"][i],
                   bleu._preprocess_segment(line), exact=True)
    for k, lines in enumerate(ref_lines):
        for i, line in enumerate(lines):
            cmp.number("%s: reference %d line %d tokens" % (name, k + 1, i + 1), ours["tokens"]["refs"][k][i],
                       bleu._preprocess_segment(line), exact=True)
    for i, line in enumerate(sys_lines):
        one = BLEU(lowercase=lowercase).corpus_score([line], [[r[i]] for r in ref_lines])
        cmp.score("%s: line %d" % (name, i + 1), ours["lines"][i], one)
    print("%-22s BLEU %.6f  (%d lines; %s)" % (name, ours["score"], len(hyps), ours["text"]), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir")
    parser.add_argument("--cli", help="the bleu_cli executable (default BUILD_DIR/tests/bleu_cli)")
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--keep", help="write the generated files here (default: a temporary directory)")
    args = parser.parse_args()

    cli = args.cli or os.path.join(args.build_dir, "tests", "bleu_cli")
    if not os.access(cli, os.X_OK):
        print("FAIL: no bleu_cli at %s (build the bleu_cli target)" % cli)
        return 1
    global PYTHON_TARGET
    PYTHON_TARGET = os.path.join(os.path.abspath(args.build_dir), "python-sacrebleu")
    sacrebleu, why = import_sacrebleu(PYTHON_TARGET)
    if sacrebleu is None:
        print("SKIP: %s" % why)
        return SKIP
    print("sacrebleu %s from %s" % (sacrebleu.__version__, os.path.dirname(sacrebleu.__file__)))

    rng = random.Random(args.seed)
    hyps, refs = generate(rng, args.lines, 3)
    cmp = Comparison()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or tmp
        os.makedirs(out, exist_ok=True)
        for num_refs, lowercase in [(1, False), (1, True), (2, False), (3, True)]:
            check_setting(sacrebleu, cli, out, hyps, refs[:num_refs], lowercase, cmp)

    print("compared %d scores (4 corpora of %d lines and every line alone): max |difference| %g, %d of %d "
          "scores bit-identical; counts, totals, lengths, signatures, text lines and tokens: %s"
          % (cmp.scores, args.lines, cmp.max_diff, cmp.identical, cmp.scores,
             "identical" if not cmp.failures else "%d differences" % len(cmp.failures)))
    if cmp.failures:
        for line in cmp.failures[:30]:
            print("FAIL " + line)
        if len(cmp.failures) > 30:
            print("... and %d more" % (len(cmp.failures) - 30))
        return 1
    print("ok: srutrain's BLEU equals sacrebleu %s" % SACREBLEU_VERSION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
