"""Benchmark: one training step (forward + backward + AdamW step) with eager, inductor and
ember, in one run.

    python bench/train.py [--models bert,gpt2,llama,vit,resnet,convnext] [--batch 4]
                          [--rounds 5] [--steps 3] [--no-memory]

Per model, one process times the three variants in alternating rounds (median step
time; the machine is shared and noisy) and reports each variant's compile time (its
first step minus eager's, with inductor's and ember's caches empty at the start of the
run). Then each variant runs alone in a fresh process to measure
its peak memory during steady-state steps: the resident-set high-water mark (VmHWM)
above the resident set before them, reset through /proc/self/clear_refs (torch's CPU
allocator keeps no statistics, and tracemalloc does not see it), with glibc told to map
and unmap every tensor-sized block so that the resident set follows live memory. Compiled variants
compile the model's forward/backward and `optimizer.step` with their backend. Dropout
is 0.1 as the models ship.
"""
import argparse
import copy
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings

import torch

MODELS = ["bert", "gpt2", "llama", "vit", "resnet", "convnext"]
VARIANTS = ["eager", "inductor", "ember"]


def _setup(name, variant, batch):
    from ember.models import build_training

    torch.manual_seed(0)
    model, inputs, loss_fn = build_training(name, scale="bench", batch=batch, dropout=0.1)
    model = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    forward, step = model, opt.step
    if variant == "inductor":
        forward, step = torch.compile(model), torch.compile(opt.step)
    elif variant == "ember":
        import ember

        forward = ember.compile(model)
        step = torch.compile(opt.step, backend="ember")

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(forward(*inputs))
        loss.backward()
        step()
        return loss

    return train_step


def time_model(name, batch, rounds, steps):
    torch._dynamo.reset()
    fns, first = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for variant in VARIANTS:
            fns[variant] = _setup(name, variant, batch)
            t = time.perf_counter()
            fns[variant]()
            first[variant] = time.perf_counter() - t
            fns[variant]()  # warm
        times = {v: [] for v in VARIANTS}
        for _ in range(rounds):
            for variant in VARIANTS:
                for _ in range(steps):
                    t = time.perf_counter()
                    fns[variant]()
                    times[variant].append(time.perf_counter() - t)
    medians = {v: statistics.median(ts) * 1e3 for v, ts in times.items()}
    compile_s = {v: max(first[v] - medians["eager"] / 1e3, 0.0) for v in VARIANTS}
    return medians, compile_s


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def peak_memory_mb(name, variant, batch, steps):
    """Resident-set growth during `steps` steady-state steps (compiled and warmed
    first), in MB."""
    import gc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = _setup(name, variant, batch)
        fn()
        fn()
        gc.collect()
        base = _status_kb("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        for _ in range(steps):
            fn()
    return (_status_kb("VmHWM") - base) / 1024


def _child_memory(name, variant, batch, steps):
    # Tensors of 64 KiB and up are mmapped and unmapped when freed, so the resident set
    # follows live memory instead of glibc's cached heap.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    done = subprocess.run([sys.executable, __file__, "--memory-child", name, variant,
                           "--batch", str(batch), "--steps", str(steps)],
                          capture_output=True, text=True, env=env)
    lines = [l for l in done.stdout.splitlines() if l.startswith("MEMORY")]
    if done.returncode or not lines:
        return float("nan")
    return json.loads(lines[-1][len("MEMORY"):])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.memory_child:
        print("MEMORY" + json.dumps(peak_memory_mb(*args.memory_child, args.batch, args.steps)))
        return 0
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        from models import _fresh_caches  # bench/models.py: empty caches for this run

        _fresh_caches()  # compile times are cold for both backends
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}")
    print(f"{'model':9s} {'eager ms':>9s} {'ind ms':>8s} {'ember ms':>9s} {'eager/ember':>11s} "
          f"{'ind/ember':>9s} {'ind comp s':>10s} {'emb comp s':>10s} "
          f"{'mem MB eager/ind/ember':>23s}")
    speedups, versus = [], []
    for name in [m for m in args.models.split(",") if m]:
        medians, compile_s = time_model(name, args.batch, args.rounds, args.steps)
        memory = {v: float("nan") for v in VARIANTS}
        if not args.no_memory:
            memory = {v: _child_memory(name, v, args.batch, args.steps) for v in VARIANTS}
        speedups.append(medians["eager"] / medians["ember"])
        versus.append(medians["inductor"] / medians["ember"])
        mem = "/".join(f"{memory[v]:.0f}" for v in VARIANTS)
        print(f"{name:9s} {medians['eager']:9.1f} {medians['inductor']:8.1f} "
              f"{medians['ember']:9.1f} {speedups[-1]:11.2f} {versus[-1]:9.2f} "
              f"{compile_s['inductor']:10.1f} {compile_s['ember']:10.1f} {mem:>23s}",
              flush=True)
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
    if speedups:
        print(f"geomean eager/ember {geo(speedups):.3f}   inductor/ember {geo(versus):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
