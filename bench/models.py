"""Benchmark: eager vs torch.compile (inductor) vs ember on real HF models, in one run.

    python bench/models.py [--models bert,gpt2] [--batch 4] [--iters 20]

Prints median latency per model, the ratios eager/ember and inductor/ember, their
geomeans, and compile times (first call).
"""
import argparse
import math
import statistics
import sys
import time
import warnings

import torch

import ember
from ember.models import MODEL_NAMES, build, first_tensor


def _median_ms(fn, inputs, iters, warmup=3):
    with torch.no_grad():
        for _ in range(warmup):
            fn(*inputs)
        times = []
        for _ in range(iters):
            t = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


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
    row["eager_ms"] = _median_ms(model, inputs, iters)
    torch._dynamo.reset()
    inductor = torch.compile(model)
    row["inductor_compile_s"], _ = _first_call_s(inductor, inputs)
    row["inductor_ms"] = _median_ms(inductor, inputs, iters)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = ember.compile(model)
        row["ember_compile_s"], out = _first_call_s(fast, inputs)
    row["fallbacks"] = sum("ember" in str(w.message) for w in caught)
    row["max_abs_err"] = (first_tensor(out) - expected).abs().max().item()
    row["ember_ms"] = _median_ms(fast, inputs, iters)
    torch._dynamo.reset()
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default=",".join(MODEL_NAMES))
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--iters", type=int, default=20)
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
