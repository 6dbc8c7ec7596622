"""Benchmark: eager vs torch.compile (inductor) vs ember on real HF models, in one run.

    python bench/models.py [--models bert,gpt2] [--batch 1,8] [--iters 30] [--no-warm]
    python bench/models.py --device cuda --dtype float32,bfloat16     (on a GPU)
    python bench/models.py --freezing     (both compilers with weights frozen: inductor's
                                           freezing, ember's options={"freezing": True})

Per model and batch size: median latency of the three variants (timed in alternating
rounds: the machine is shared and noisy), the ratios eager/ember and inductor/ember,
ember's kernels per graph, and compile times (the compile call and the first call):
cold (with fresh, empty inductor and ember caches made for this run; Dynamo's one-time
start-up is paid first, so neither compiler pays it for the other) and warm (in a FRESH
process per compiler that finds the caches this run filled: what a user pays on the next
start, imports included).
ember's malloc setting (targets/cpu/malloc_tuning.py) is process-wide, so eager and inductor
run with it too (`EMBER_RETAIN_FREED_MEMORY=0` runs without it).
Geomeans per batch size at the end. `--json out.json` keeps the rows. On a GPU each timed
call ends with a device synchronisation, and ember's target follows the model's device.
"""
import argparse
import copy
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch

import ember
from ember.models import MODEL_NAMES, build, first_tensor


# --device / --dtype of this run (the warm children get them on their command line)
_SETUP = {"device": "cpu", "dtype": torch.float32, "freezing": False}


def _synchronized(fn):
    if _SETUP["device"] != "cuda":
        return fn

    def call(*args):
        out = fn(*args)
        torch.cuda.synchronize()
        return out
    return call


def _on_device(model, inputs):
    device, dtype = _SETUP["device"], _SETUP["dtype"]
    model = model.to(device=device, dtype=dtype)
    inputs = [x.to(device=device, dtype=dtype if x.is_floating_point() else x.dtype)
              for x in inputs]
    return model, inputs


def _interleaved_median_ms(fns, inputs, iters, rounds=5, warmup=3):
    """Median latency per variant, measured in alternating rounds so that a slow spell of
    the machine (shared hosts have them) hits every variant alike."""
    times = {name: [] for name in fns}
    fns = {name: _synchronized(fn) for name, fn in fns.items()}
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


def _compile_and_first_call(make, inputs):
    """(seconds, compiled fn, output): `make()` (torch.compile / ember.compile, which import
    their compiler the first time) and the first call, what a user waits for."""
    t = time.perf_counter()
    fn = make()
    with torch.no_grad():
        out = fn(*inputs)
    return time.perf_counter() - t, fn, out


class _KernelCounter(logging.Handler):
    """Reads ember's 'compiled/loaded graph (N nodes, K kernels)' log records."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.kernels = []

    def emit(self, record):
        if isinstance(record.msg, str) and "kernels)" in record.msg and len(record.args) > 2:
            self.kernels.append(record.args[2])


def _compile_both(name, batch, variants=("inductor", "ember")):
    """(model, inputs, inductor fn, ember fn, row with compile times and kernel counts).
    `variants`: which compilers to run (a warm child times one per fresh process)."""
    torch.manual_seed(0)
    model, inputs = build(name, scale="bench", batch=batch)
    model, inputs = _on_device(model.eval(), inputs)
    row = {"model": name, "batch": batch}
    torch._dynamo.reset()
    inductor = fast = out = None
    if "inductor" in variants:
        inductor_options = {"freezing": True} if _SETUP["freezing"] else None
        row["inductor_compile_s"], inductor, _ = _compile_and_first_call(
            lambda: torch.compile(model, options=inductor_options), inputs)
    if "ember" not in variants:
        return model, inputs, inductor, fast, out, row
    # A second backend needs its own Dynamo cache entry: compile ember on a shallow copy
    # of the module (same parameters), so both stay callable side by side.
    counter = _KernelCounter()
    logger = logging.getLogger("ember")
    logger.addHandler(counter)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            row["ember_compile_s"], fast, out = _compile_and_first_call(
                lambda: ember.compile(copy.copy(model),
                                      options={"freezing": _SETUP["freezing"]}), inputs)
    finally:
        logger.removeHandler(counter)
        logger.setLevel(level)
    row["fallbacks"] = sum("ember" in str(w.message) for w in caught)
    row["graphs"] = len(counter.kernels)
    row["kernels"] = "+".join(str(k) for k in counter.kernels)
    return model, inputs, inductor, fast, out, row


def _warm_up_dynamo():
    """Dynamo's one-time costs in a process (imports, first trace) on a tiny function,
    so that the cold compile times below belong to each compiler, whichever runs first."""
    torch.compile(lambda x: x.sin() + 1, backend="eager")(torch.ones(3))
    torch._dynamo.reset()


def bench_model(name, batch, iters):
    model, inputs, inductor, fast, out, row = _compile_both(name, batch)
    with torch.no_grad():
        expected = first_tensor(model(*inputs))
    row["max_abs_err"] = (first_tensor(out) - expected).abs().max().item()
    medians = _interleaved_median_ms({"eager": model, "inductor": inductor, "ember": fast},
                                     inputs, iters)
    row.update({f"{k}_ms": v for k, v in medians.items()})
    torch._dynamo.reset()
    return row


def _warm_compile(name, batch):
    """Compile times (compile call and first call) in fresh processes that find this run's caches,
    one process per compiler (what a user pays on the next start, imports included)."""
    times = {}
    for variant in ("inductor", "ember"):
        out = subprocess.run([sys.executable, __file__, "--warm-child", name, str(batch),
                              variant, "--device", _SETUP["device"],
                              "--dtype", str(_SETUP["dtype"]).replace("torch.", "")]
                             + (["--freezing"] if _SETUP["freezing"] else []),
                             capture_output=True, text=True, env=os.environ.copy())
        key = f"{variant}_compile_s"
        times[key] = float("nan")
        for line in out.stdout.splitlines():
            if line.startswith("{"):
                times[key] = json.loads(line)[key]
    return times


def _warm_child(name, batch, variant):
    _, _, _, _, _, row = _compile_both(name, int(batch), variants=(variant,))
    print(json.dumps({f"{variant}_compile_s": row[f"{variant}_compile_s"]}))


def _fresh_caches():
    """Empty inductor and ember caches for this run (kept for the warm children)."""
    root = tempfile.mkdtemp(prefix="ember-bench-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["EMBER_CACHE_DIR"] = os.path.join(root, "ember")
    return root


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default=",".join(MODEL_NAMES))
    p.add_argument("--batch", default="1,8", help="batch sizes, comma-separated")
    p.add_argument("--iters", type=int, default=30, help="timed calls per variant")
    p.add_argument("--no-warm", action="store_true", help="skip the warm-start processes")
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="float32",
                   help="model dtypes, comma-separated (float32, bfloat16, float16)")
    p.add_argument("--freezing", action="store_true",
                   help="freeze the weights in both compilers (inference only)")
    p.add_argument("--warm-child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    _SETUP["device"] = args.device
    _SETUP["freezing"] = args.freezing
    dtypes = [getattr(torch, d) for d in args.dtype.split(",") if d]
    _SETUP["dtype"] = dtypes[0]
    if args.warm_child:
        _warm_child(*args.warm_child)
        return 0
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        _fresh_caches()
    _warm_up_dynamo()
    names = [n for n in args.models.split(",") if n]
    batches = [int(b) for b in args.batch.split(",") if b]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; latency in ms, "
          f"compile in s (cold / warm in a fresh process)")
    print(f"{'model':12s} {'batch':>5s} {'eager':>8s} {'inductor':>8s} {'ember':>8s} "
          f"{'eager/emb':>9s} {'ind/emb':>7s} {'ind compile':>12s} {'ember compile':>13s} "
          f"{'kernels':>9s} {'max err':>8s} {'fb':>3s}")
    rows = []
    for dtype in dtypes:
        _SETUP["dtype"] = dtype
        if len(dtypes) > 1 or args.device != "cpu":
            print(f"-- {args.device}, {str(dtype).replace('torch.', '')}")
        rows += _run_table(names, batches, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def _run_table(names, batches, args):
    rows = []
    for batch in batches:
        for name in names:
            r = bench_model(name, batch, args.iters)
            r["device"], r["dtype"] = args.device, str(_SETUP["dtype"])
            warm = ({"inductor_compile_s": float("nan"), "ember_compile_s": float("nan")}
                    if args.no_warm else _warm_compile(name, batch))
            r["inductor_warm_s"], r["ember_warm_s"] = (warm["inductor_compile_s"],
                                                       warm["ember_compile_s"])
            rows.append(r)
            print(f"{name:12s} {batch:5d} {r['eager_ms']:8.2f} {r['inductor_ms']:8.2f} "
                  f"{r['ember_ms']:8.2f} {r['eager_ms'] / r['ember_ms']:9.2f} "
                  f"{r['inductor_ms'] / r['ember_ms']:7.2f} "
                  f"{r['inductor_compile_s']:5.1f}/{r['inductor_warm_s']:<5.1f} "
                  f"{r['ember_compile_s']:6.1f}/{r['ember_warm_s']:<5.1f} "
                  f"{r['kernels']:>9s} {r['max_abs_err']:8.1e} {r['fallbacks']:3d}", flush=True)
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
    for batch in batches:
        rs = [r for r in rows if r["batch"] == batch]
        print(f"batch {batch}: geomean eager/ember {geo([r['eager_ms'] / r['ember_ms'] for r in rs]):.3f}"
              f", inductor/ember {geo([r['inductor_ms'] / r['ember_ms'] for r in rs]):.3f}"
              f", compile ember/inductor cold "
              f"{geo([r['ember_compile_s'] / r['inductor_compile_s'] for r in rs]):.2f}"
              + ("" if args.no_warm else ", warm " + f"{geo([r['ember_warm_s'] / r['inductor_warm_s'] for r in rs]):.2f}"))
    return rows


if __name__ == "__main__":
    sys.exit(main())
