#!/usr/bin/python3
"""Plots training loss and evaluation metrics of one or more srutrain runs into a PNG.

Usage: scripts/plot_metrics.py RUN_DIR [RUN_DIR ...] [-o curves.png] [--metric bpc] [--x step|time]

Reads each run's metrics.jsonl (training lines: step, loss, ms_per_step; evaluation lines: step,
eval.{metric}). Left panel: training loss; right panel: the validation metric. --x time puts
wall-clock training time (from ms_per_step) on the x axis, for comparisons at equal time.
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import argparse
import json
import os
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_metrics.py needs matplotlib: apt-get install python3-matplotlib (and run it with /usr/bin/python3)")


def read_run(run_dir, metric):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        sys.exit(f"plot_metrics.py: {path} does not exist (is {run_dir} a srutrain run directory?)")
    train, evals = [], []
    seconds, last_step = 0.0, 0
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                sys.exit(f"plot_metrics.py: {path}:{line_no}: not a JSON line")
            if "eval" in rec and metric in rec["eval"]:
                evals.append((rec["step"], seconds, rec["eval"][metric]))
            elif "loss" in rec and "ms_per_step" in rec:
                seconds += rec["ms_per_step"] / 1000.0 * (rec["step"] - last_step)
                last_step = rec["step"]
                train.append((rec["step"], seconds, rec["loss"]))
    return train, evals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories")
    parser.add_argument("-o", "--output", default="curves.png", help="PNG file to write (default curves.png)")
    parser.add_argument("--metric", default="bpc", help="evaluation metric to plot (default bpc)")
    parser.add_argument("--x", choices=["step", "time"], default="step", help="x axis: steps or training seconds")
    parser.add_argument("--title", default="", help="figure title")
    args = parser.parse_args()

    fig, (ax_loss, ax_eval) = plt.subplots(1, 2, figsize=(12, 4.5))
    column = 0 if args.x == "step" else 1
    for run in args.runs:
        train, evals = read_run(run, args.metric)
        label = os.path.basename(os.path.normpath(run))
        if train:
            ax_loss.plot([t[column] for t in train], [t[2] for t in train], label=label)
        if evals:
            ax_eval.plot([e[column] for e in evals], [e[2] for e in evals], marker="o", label=label)
    xlabel = "step" if args.x == "step" else "training time (s)"
    ax_loss.set(xlabel=xlabel, ylabel="training loss (nats)", title="training loss")
    ax_eval.set(xlabel=xlabel, ylabel=f"validation {args.metric}", title=f"validation {args.metric}")
    for ax in (ax_loss, ax_eval):
        ax.grid(alpha=0.3)
        ax.legend()
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
