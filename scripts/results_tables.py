#!/usr/bin/env python3
"""Writes the generated tables of docs/results.md from run summaries, with the papers' numbers beside ours.

    scripts/results_tables.py [--check]

Sources: results/<scale>/<experiment>/<run>.json, the summaries written by scripts/reproduce/summarize.py
(copied there by `scripts/reproduce/ci.sh --record` or by hand from a reproduction's --out directory), and
scripts/reproduce/papers.json. In docs/results.md every block

    <!-- generated: EXPERIMENT SCALE -->
    ...
    <!-- end generated -->

is replaced by the table of results/SCALE/EXPERIMENT/*.json. --check changes nothing and exits 1 when
a block differs from what the summaries give (a test runs it, so the tables cannot drift from the runs).
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- generated: (\S+) (\S+) -->\n)(.*?)(<!-- end generated -->)", re.S)


def number(value, digits):
    if value is None:
        return ""
    if isinstance(value, float) and value != int(value) or digits:
        return "%.*f" % (digits, value)
    return "{:,}".format(int(value))


def metric_columns(summaries):
    """The task metric per split ("valid.f1", "test.bpc"...), its companions (exact match beside F1; lower-cased
    and beam-search BLEU beside BLEU) and its std where cross-validation gave one."""
    companions = {"f1": {"exact_match"}, "bleu": {"bleu_lc", "beam_bleu", "beam_bleu_lc"}}
    keys = []
    for s in summaries:
        names = {s.get("metric")} | companions.get(s.get("metric"), set())
        for key in s["metrics"]:
            split, _, name = key.partition(".")
            if (name in names or name.endswith("_std") and name[:-4] in names) and key not in keys:
                keys.append(key)
    return sorted((k for k in keys if not k.endswith("_std")), key=lambda k: (k.split(".")[0] != "valid", k))


def scaled(summary, key):
    value = summary["metrics"].get(key)
    if value is None:
        return ""
    percent = summary.get("metric") == "accuracy"
    std = summary["metrics"].get(key + "_std")
    text = "%.2f" % (100 * value) if percent else "%.4f" % value if summary.get("metric") in ("bpc",) else "%.2f" % value
    if std is not None:
        text += " ± %.2f" % (100 * std if percent else std)
    return text


def table(experiment, scale, papers):
    paths = sorted(glob.glob(os.path.join(ROOT, "results", scale, experiment, "*.json")))
    if not paths:
        sys.exit("results_tables.py: no summaries in results/%s/%s/ for a generated block of docs/results.md"
                 % (scale, experiment))
    summaries = [json.load(open(p)) for p in paths]
    columns = metric_columns(summaries)
    percent = any(s.get("metric") == "accuracy" for s in summaries)
    head = ["run"] + [c + (" (%)" if percent else "") for c in columns]
    head += ["paper", "epochs", "s / epoch", "train tokens/s", "parameters", "stopped", "date, commit"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        paper = papers.get("%s/%s" % (experiment, s["run"]))
        paper_text = "%s %s" % (paper["value"], paper["metric"]) if paper else ""
        cells = [s["run"]] + [scaled(s, c) for c in columns]
        cells += [paper_text, number(s.get("epochs"), 2 if s.get("epochs") and s["epochs"] != int(s["epochs"]) else 0),
                  number(s.get("seconds_per_epoch"), 1), number(s.get("train_tokens_per_s"), 0),
                  number(s.get("parameters"), 0), s.get("stopped") or "",
                  "%s, %s" % (s.get("date", ""), s.get("commit") or "")]
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    machines = sorted({"%s, %s cores%s, OPENBLAS_CORETYPE=%s, %s thread(s)" % (
        s["machine"].get("cpu"), s["machine"].get("cores"),
        ", GPU " + s["machine"]["gpu"] if s["machine"].get("gpu") else "",
        s["machine"].get("openblas_coretype") or "unset", s.get("threads")) for s in summaries if s.get("machine")})
    notes = ["Machine: " + "; ".join(machines) + "."] if machines else []
    sources = {}
    for s in summaries:
        if s.get("source"):
            sources.setdefault(s["source"], []).append(s["run"])
    notes += ["%s: %s." % (", ".join(runs) if len(runs) < len(summaries) else "All runs", source.rstrip("."))
              for source, runs in sources.items()]
    return "\n".join(rows + ([""] + notes if notes else [])) + "\n"


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit(__doc__)
    papers = {k: v for k, v in json.load(open(os.path.join(ROOT, "scripts", "reproduce", "papers.json"))).items()
              if not k.startswith("_")}
    path = os.path.join(ROOT, "docs", "results.md")
    text = open(path).read()
    new = BLOCK.sub(lambda m: m.group(1) + table(m.group(2), m.group(3), papers) + m.group(5), text)
    if check:
        if new != text:
            print("docs/results.md: a generated table differs from results/*.json: run scripts/results_tables.py")
            sys.exit(1)
        print("docs/results.md: %d generated tables are current" % len(BLOCK.findall(text)))
        return
    if new != text:
        tmp = path + ".tmp"
        open(tmp, "w").write(new)
        os.replace(tmp, path)
    print("docs/results.md: %d generated tables written" % len(BLOCK.findall(new)))


if __name__ == "__main__":
    main()
