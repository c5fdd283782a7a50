#!/usr/bin/env python3
# The peer row for `srubench sru-vs-lstm` on the CPU: torch.nn.LSTM (one layer, input size = hidden
# size = d, batch B, float32) forward + backward of sum(output * ones), timed as srubench times its
# rows (warm-up runs, then the median of the timed repeats), with the same thread count; --cpu-time
# takes the process's CPU time instead of the wall clock, as srubench sru-vs-lstm --cpu-time.
# Usage: python3 scripts/torch_lstm_bench.py --threads 2 --lengths 32 128 --hidden 256 512 --batch 32
import argparse
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lengths", type=int, nargs="+", default=[32, 128])
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 512])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--cpu-time", action="store_true", help="time with the process's CPU time")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    clock = time.process_time if a.cpu_time else time.perf_counter
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads" + (", clock: process CPU time" if a.cpu_time else ""))
    print("| impl | L | B | d | ms |")
    print("|---|---|---|---|---|")
    for L in a.lengths:
        for d in a.hidden:
            lstm = torch.nn.LSTM(d, d)
            x = torch.empty(L, a.batch, d).uniform_(-1, 1).requires_grad_(True)
            grad = torch.ones(L, a.batch, d)

            def run():
                lstm.zero_grad()
                x.grad = None
                out, _ = lstm(x)
                out.backward(grad)

            for _ in range(a.warmup):
                run()
            times = []
            for _ in range(a.repeats):
                start = clock()
                run()
                times.append((clock() - start) * 1e3)
            print(f"| torch_lstm | {L} | {a.batch} | {d} | {statistics.median(times):.2f} |")


if __name__ == "__main__":
    main()
