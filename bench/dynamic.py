"""Benchmark: dynamic-shape artifacts vs static ones, and a sweep over batch sizes.

    python bench/dynamic.py [--models bert,gpt2,llama,vit,resnet] [--iters 20] [--sweep bert,gpt2,resnet]

Part 1, per model and size: median latency of eager, ember static (dynamic=False: one
compile per size) and ember dynamic (dynamic=True: one compile for all sizes), timed in
alternating rounds; ratios static/dynamic (goal >= 0.9) and eager/dynamic (goal >= 1).
Part 2, per sweep model: total wall time (compiles included) of calling the model at 16
batch sizes, 3 calls each, with eager, inductor (dynamic=True), ember (torch's default:
the second size recompiles once as dynamic) and ember dynamic=True; each in a fresh
process, cold (empty compile caches) and warm (the caches of the cold run).
"""
import argparse
import copy
import math
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
from models import _interleaved_median_ms  # noqa: E402  (bench/models.py)

import ember  # noqa: E402
from ember.models import _ids, _img, build, first_tensor  # noqa: E402
from ember.runtime.cache import GLOBAL_CACHE  # noqa: E402

TEXT = {"bert", "gpt2", "llama", "t5-encoder", "distilbert"}
TEXT_SIZES = [(2, 32), (4, 64), (8, 128)]   # (batch, sequence length)
IMAGE_SIZES = [2, 4, 8]                     # batch


def _inputs(name, model_inputs, size):
    if name in TEXT:
        batch, seq = size
        return (_ids(batch, seq, 1000),)
    image = model_inputs[0]
    return (_img(size, image.shape[1], image.shape[-1]),)


def _sizes(name):
    return TEXT_SIZES if name in TEXT else IMAGE_SIZES


def bench_static_vs_dynamic(name, iters):
    torch.manual_seed(0)
    model, model_inputs = build(name, scale="bench", batch=2)
    torch._dynamo.reset()
    static = ember.compile(copy.copy(model), dynamic=False)
    dynamic = ember.compile(copy.copy(model), dynamic=True)
    rows = []
    for size in _sizes(name):
        inputs = _inputs(name, model_inputs, size)
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            expected = first_tensor(model(*inputs))
            t = time.perf_counter()
            err = (first_tensor(dynamic(*inputs)) - expected).abs().max().item()
            dyn_first = time.perf_counter() - t
            t = time.perf_counter()
            first_tensor(static(*inputs))
            static_first = time.perf_counter() - t
        medians = _interleaved_median_ms({"eager": model, "static": static, "dynamic": dynamic},
                                         inputs, iters)
        rows.append({"model": name, "size": size, "err": err, "dyn_first_s": dyn_first,
                     "static_first_s": static_first,
                     "fallbacks": sum("ember" in str(w.message) for w in caught), **medians})
    torch._dynamo.reset()
    return rows


SWEEP_VARIANTS = ("eager", "inductor", "ember", "ember-dyn")


def sweep_once(name, variant, calls=3):
    """(seconds, ember compiles) of calling `variant` of model `name` at 16 batch sizes,
    `calls` times each, compiles included: what a server sees after it starts."""
    torch.manual_seed(0)
    model, model_inputs = build(name, scale="bench", batch=2)
    seq = 64
    batches = [(_ids(b, seq, 1000),) if name in TEXT else (_img(b, 3, model_inputs[0].shape[-1]),)
               for b in range(2, 18)]
    make = {"eager": lambda: model,
            "inductor": lambda: torch.compile(model, dynamic=True),
            "ember": lambda: ember.compile(model),               # torch's default
            "ember-dyn": lambda: ember.compile(model, dynamic=True)}[variant]
    torch._dynamo.reset()
    before = GLOBAL_CACHE.misses
    t = time.perf_counter()
    fn = make()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for inputs in batches:
            for _ in range(calls):
                fn(*inputs)
    return time.perf_counter() - t, GLOBAL_CACHE.misses - before


def bench_sweep(name):
    """Each variant in a fresh process, twice: cold (empty ember and inductor caches: the
    first run of a program) and warm (the caches the cold run left: every later run).
    Returns {variant: (cold s, warm s, ember compiles)}."""
    import json
    import subprocess
    import tempfile

    results = {}
    with tempfile.TemporaryDirectory(prefix="ember-sweep-") as scratch:
        for variant in SWEEP_VARIANTS:
            env = dict(os.environ,
                       EMBER_CACHE_DIR=os.path.join(scratch, variant, "ember"),
                       TORCHINDUCTOR_CACHE_DIR=os.path.join(scratch, variant, "inductor"))
            runs = []
            for _ in ("cold", "warm"):
                done = subprocess.run([sys.executable, __file__, "--sweep-child", name, variant],
                                      env=env, capture_output=True, text=True)
                line = [l for l in done.stdout.splitlines() if l.startswith("SWEEP")]
                if done.returncode or not line:
                    raise RuntimeError(f"sweep {name}/{variant} failed:\n{done.stderr[-2000:]}")
                runs.append(json.loads(line[-1][len("SWEEP"):]))
            results[variant] = (runs[0]["s"], runs[1]["s"], runs[0]["compiles"])
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default="bert,gpt2,llama,vit,resnet")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--sweep", default="bert,gpt2,resnet")
    p.add_argument("--sweep-child", nargs=2, metavar=("MODEL", "VARIANT"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sweep_child:
        import json
        seconds, compiles = sweep_once(*args.sweep_child)
        print("SWEEP" + json.dumps({"s": seconds, "compiles": compiles}), flush=True)
        return 0
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'model':8s} {'size':>9s} {'eager ms':>9s} {'static':>9s} {'dynamic':>9s} "
          f"{'static/dyn':>10s} {'eager/dyn':>9s} {'1st dyn s':>9s} {'1st st s':>8s} "
          f"{'max err':>8s} {'fallbk':>6s}")
    ratios = []
    for name in [n for n in args.models.split(",") if n]:
        for r in bench_static_vs_dynamic(name, args.iters):
            ratios.append((r["static"] / r["dynamic"], r["eager"] / r["dynamic"]))
            size = "x".join(map(str, r["size"])) if isinstance(r["size"], tuple) else str(r["size"])
            print(f"{name:8s} {size:>9s} {r['eager']:9.2f} {r['static']:9.2f} {r['dynamic']:9.2f} "
                  f"{r['static'] / r['dynamic']:10.2f} {r['eager'] / r['dynamic']:9.2f} "
                  f"{r['dyn_first_s']:9.1f} {r['static_first_s']:8.1f} {r['err']:8.1e} "
                  f"{r['fallbacks']:6d}", flush=True)
    if ratios:
        geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
        print(f"geomean static/dynamic {geo([a for a, _ in ratios]):.3f}  "
              f"min {min(a for a, _ in ratios):.2f}")
        print(f"geomean eager/dynamic  {geo([b for _, b in ratios]):.3f}  "
              f"min {min(b for _, b in ratios):.2f}")
    sweep = [n for n in args.sweep.split(",") if n]
    if sweep:
        print("\nsweep: 16 batch sizes (2..17), 3 calls each, each variant in a fresh process; "
              "total seconds incl. compiles, cold (empty caches) / warm (second run)")
        print(f"{'model':8s} {'eager':>11s} {'inductor dyn':>13s} {'ember':>13s} "
              f"{'ember dyn':>13s} {'ember compiles':>15s}")
        for name in sweep:
            r = bench_sweep(name)
            cell = lambda v: f"{r[v][0]:6.1f}/{r[v][1]:<6.1f}"
            print(f"{name:8s} {cell('eager'):>11s} {cell('inductor'):>13s} {cell('ember'):>13s} "
                  f"{cell('ember-dyn'):>13s} {r['ember'][2]:>8d}/{r['ember-dyn'][2]:<6d}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
