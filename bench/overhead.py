"""Benchmark: the per-call overhead of a compiled graph, on a one-op graph whose kernel
costs next to nothing (`x + 1` on 4 floats), eager vs inductor vs ember, in one run.

    python bench/overhead.py [--calls 20000] [--rounds 5]

Prints the median microseconds per call of each variant (alternating rounds) under
`torch.no_grad()` and in grad mode with an input that does not require grad, and what
compiled code adds over eager's own dispatch.
"""
import argparse
import statistics
import sys
import time

import torch

import ember


def _per_call_us(fn, x, calls):
    t = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - t) / calls * 1e6


def measure(calls, rounds):
    def add_one(x):
        return x + 1

    x = torch.randn(4)
    variants = {"eager": add_one,
                "inductor": torch.compile(add_one),
                "ember": torch.compile(lambda x: x + 1, backend="ember")}
    rows = {}
    for mode in ("no_grad", "grad"):
        ctx = torch.no_grad if mode == "no_grad" else torch.enable_grad
        with ctx():
            for fn in variants.values():  # compile and warm up
                for _ in range(100):
                    fn(x)
            times = {name: [] for name in variants}
            for _ in range(rounds):
                for name, fn in variants.items():
                    times[name].append(_per_call_us(fn, x, calls // rounds))
        rows[mode] = {name: statistics.median(ts) for name, ts in times.items()}
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    rows = measure(args.calls, args.rounds)
    print(f"torch {torch.__version__}: microseconds per call of `x + 1` (4 floats)")
    print(f"{'mode':8s} {'eager':>8s} {'inductor':>9s} {'ember':>8s} {'ind-eager':>10s} "
          f"{'ember-eager':>12s}")
    for mode, r in rows.items():
        print(f"{mode:8s} {r['eager']:8.2f} {r['inductor']:9.2f} {r['ember']:8.2f} "
              f"{r['inductor'] - r['eager']:10.2f} {r['ember'] - r['eager']:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
