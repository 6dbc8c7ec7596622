"""Benchmark: eager vs torch.compile (inductor) vs ember on real HF models, in one run.

    python bench/models.py [--models bert,gpt2] [--batch 4] [--iters 20]

Prints median latency per model (the three variants timed in alternating rounds), the
ratios eager/ember and inductor/ember, their geomeans, and compile times (first call).
"""
import argparse
import copy
import math
import statistics
import sys
import time
import warnings

import torch

import ember
from ember.models import MODEL_NAMES, build, first_tensor


def _interleaved_median_ms(fns, inputs, iters, rounds=5, warmup=3):
    """Median latency per variant, measured in alternating rounds so that a slow spell of
    the machine (shared hosts have them) hits every variant alike."""
    times = {name: [] for name in fns}
    with torch.no_grad():
        for fn in fns.values():
            for _ in range(warmup):
                fn(*inputs)
        per_round = max(1, iters // rounds)
        for _ in range(rounds):
            for name, fn in fns.items():
                for _ in range(per_round):
                    t = time.perf_counter()
                    fn(*inputs)
                    times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) * 1e3 for name, ts in times.items()}


def _first_call_s(fn, inputs):
    t = time.perf_counter()
    with torch.no_grad():
        out = fn(*inputs)
    return time.perf_counter() - t, out


def bench_model(name, batch, iters):
    torch.manual_seed(0)
    model, inputs = build(name, scale="bench", batch=batch)
    model = model.eval()
    with torch.no_grad():
        expected = first_tensor(model(*inputs))
    row = {"model": name}
    torch._dynamo.reset()
    inductor = torch.compile(model)
    row["inductor_compile_s"], _ = _first_call_s(inductor, inputs)
    # A second backend needs its own Dynamo cache entry: compile ember on a shallow copy
    # of the module (same parameters), so both stay callable side by side.
    ember_model = copy.copy(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = ember.compile(ember_model)
        row["ember_compile_s"], out = _first_call_s(fast, inputs)
    row["fallbacks"] = sum("ember" in str(w.message) for w in caught)
    row["max_abs_err"] = (first_tensor(out) - expected).abs().max().item()
    medians = _interleaved_median_ms({"eager": model, "inductor": inductor, "ember": fast},
                                     inputs, iters)
    row.update({f"{k}_ms": v for k, v in medians.items()})
    torch._dynamo.reset()
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default=",".join(MODEL_NAMES))
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--iters", type=int, default=50, help="timed calls per variant")
    args = p.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}")
    header = (f"{'model':12s} {'eager ms':>9s} {'inductor':>9s} {'ember':>9s} "
              f"{'eager/ember':>11s} {'ind/ember':>9s} {'compile ind':>11s} {'compile ember':>13s} "
              f"{'max err':>8s} {'fallbk':>6s}")
    print(header)
    rows = []
    for name in names:
        r = bench_model(name, args.batch, args.iters)
        rows.append(r)
        print(f"{name:12s} {r['eager_ms']:9.2f} {r['inductor_ms']:9.2f} {r['ember_ms']:9.2f} "
              f"{r['eager_ms'] / r['ember_ms']:11.2f} {r['inductor_ms'] / r['ember_ms']:9.2f} "
              f"{r['inductor_compile_s']:10.1f}s {r['ember_compile_s']:12.1f}s "
              f"{r['max_abs_err']:8.1e} {r['fallbacks']:6d}", flush=True)
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
    print(f"geomean eager/ember    {geo([r['eager_ms'] / r['ember_ms'] for r in rows]):.3f}")
    print(f"geomean inductor/ember {geo([r['inductor_ms'] / r['ember_ms'] for r in rows]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
