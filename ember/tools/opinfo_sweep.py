"""Differential test of ember against eager over PyTorch's OpInfo database.

    python -m ember.tools.opinfo_sweep                        # float32, 3 samples per op
    python -m ember.tools.opinfo_sweep --dtype bfloat16 --samples 3 --jobs 2
    python -m ember.tools.opinfo_sweep --ops add,mm,sort      # some ops only
    python -m ember.tools.opinfo_sweep --every 7              # every 7th op (CI's subset)
    python -m ember.tools.opinfo_sweep --grad                 # gradients too (training)
    python -m ember.tools.opinfo_sweep --dtype uint8          # integer samples (int32, int64)

For every OpInfo that supports the dtype on CPU, its first sample inputs are compiled
with ember (fallback on, as users run it) and compared with eager. With --grad, only ops
that support autograd, their float inputs requiring grad: the compiled forward AND
backward (the gradients of every float output against fixed random cotangents) are
compared with eager's. Each sample ends as
  PASS      compiled by ember, equal to eager
  NOKERNEL  equal to eager, but nothing reached an ember kernel (views only, a graph
            break, zero-size tensors)
  FALLBACK  equal to eager, with an ember warning: an op ran through ATen
  WRONG     a result differs from eager (values, dtype, shape)
  RAISED    ember raised where eager did not (or raised something else)
  CRASH     the process died (a signal, an LLVM abort)
Samples run in worker processes (--jobs of them), so a crash costs one sample: the
worker is restarted and the sweep goes on. Prints the counts, the failing samples and
the ops that fell back most; --json writes every record.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import time

RANDOM_WORDS = ("rand", "normal", "bernoulli", "dropout", "multinomial", "uniform",
                "exponential", "geometric", "cauchy", "log_normal", "poisson")
UNINITIALIZED = ("empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided",
                 "empty_permuted")
# Left out of --grad: AOTAutograd itself differs from eager there (aot_eager and inductor
# alike): linalg_eig_backward's data-dependent check of the phase is not traced.
GRAD_SKIPPED = {"linalg.eig"}
TOLERANCE = {"float32": (1e-3, 1e-4), "bfloat16": (3e-2, 3e-2), "float16": (1e-2, 1e-2),
             # integer samples (uint8 found lowerings that read it as signed): float32's
             # tolerance for float results (exp of an int), integer results exact
             "uint8": (1e-3, 1e-4), "int32": (1e-3, 1e-4), "int64": (1e-3, 1e-4)}
_INTEGER_SWEEPS = {"uint8", "int32", "int64"}


def _ops(dtype_name, names=None, every=1, grad=False):
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    dtype = getattr(torch, dtype_name)
    ops = [o for o in op_db if dtype in o.supported_dtypes("cpu")]
    if grad:
        ops = [o for o in ops if o.supports_autograd and _full_name(o) not in GRAD_SKIPPED
               and dtype in o.supported_backward_dtypes("cpu")]
    if names:
        ops = [o for o in ops if o.name in names or _full_name(o) in names]
    return ops[::every]


def _full_name(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


# --- the child: runs samples ---------------------------------------------------------------

def _values_only(op):
    name = op.name.split(".")[-1]
    return not (any(w in op.name for w in RANDOM_WORDS) or name in UNINITIALIZED)


def _compare(actual, expected, dtype_name, values):
    import torch

    rtol, atol = TOLERANCE[dtype_name]
    flat_a, spec_a = torch.utils._pytree.tree_flatten(actual)
    flat_e, spec_e = torch.utils._pytree.tree_flatten(expected)
    if len(flat_a) != len(flat_e):
        return f"{len(flat_a)} outputs, eager has {len(flat_e)}"
    for i, (a, e) in enumerate(zip(flat_a, flat_e)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"output {i}: {type(a).__name__}, eager a tensor"
            if a.shape != e.shape or a.dtype != e.dtype:
                return f"output {i}: {tuple(a.shape)}:{a.dtype}, eager {tuple(e.shape)}:{e.dtype}"
            if not values:
                continue
            exact = dtype_name in _INTEGER_SWEEPS and not e.is_floating_point()
            try:
                torch.testing.assert_close(a, e, rtol=0 if exact else rtol,
                                           atol=0 if exact else atol, equal_nan=True,
                                           check_device=False, check_stride=False)
            except AssertionError as exc:
                return f"output {i}: values differ: " + " ".join(str(exc).split())[:240]
        elif values and a != e and not (a != a and e != e):
            return f"output {i}: values differ: {a!r}, eager {e!r}"
    return None


def _as_user_code(fn):
    """OpInfo's Python wrappers (lambdas in torch/testing) stand for user code, but Dynamo
    skips every function defined under torch/: the same function with another file name
    is traced like a user's."""
    import types

    code = getattr(fn, "__code__", None)
    if code is None or "torch/testing" not in code.co_filename.replace("\\", "/"):
        return fn
    return types.FunctionType(code.replace(co_filename="<opinfo wrapper>"), fn.__globals__,
                              fn.__name__, fn.__defaults__, fn.__closure__)


def _within_reference(actual, expected, reference, dtype_name, elementwise=True):
    """For float16/bfloat16: ember computes in f32 and rounds once, eager rounds after every
    op, so the two may differ by more than one rounding. Judge against the op run in
    float64 instead: ember may be off by its tolerance plus twice eager's own error
    (inductor's tests compare low precision the same way, reference_in_float).
    elementwise=False (gradients) compares each tensor's largest error instead: where
    ties reorder a sort or a sum is ill-conditioned, eager's own error is large at other
    elements than ember's."""
    import torch

    rtol, atol = TOLERANCE[dtype_name]
    flat_a = torch.utils._pytree.tree_leaves(actual)
    flat_e = torch.utils._pytree.tree_leaves(expected)
    flat_r = torch.utils._pytree.tree_leaves(reference)
    if not (len(flat_a) == len(flat_e) == len(flat_r)):
        return False
    for a, e, r in zip(flat_a, flat_e, flat_r):
        if not isinstance(a, torch.Tensor) or not a.dtype.is_floating_point:
            continue
        a, e, r = a.double(), e.double(), r.double()
        finite = torch.isfinite(r)
        if not torch.equal(torch.isnan(a) & ~torch.isnan(r), torch.zeros_like(finite)):
            return False  # a NaN the float64 result does not have
        err_a = (a - r).abs().nan_to_num(0.0)
        err_e = (e - r).abs().nan_to_num(float("inf"))
        if not elementwise:
            if finite.any() and bool(err_a[finite].max() > atol + rtol * r[finite].abs().max()
                                     + 2 * err_e[finite].max()):
                return False
            continue
        if bool(((err_a > atol + rtol * r.abs() + 2 * err_e) & finite).any()):
            return False
    return True


def _in_float64(call, tensors):
    import torch

    wide = [t.double() if t.dtype.is_floating_point else t for t in tensors]
    try:
        return call(*wide)
    except Exception:
        return None


def _with_gradients(call):
    """call(*tensors) -> (outputs, gradients of the float outputs, against cotangents drawn
    from a fixed seed, with respect to the inputs that require grad); fresh leaves per call."""
    import torch

    def run(*tensors):
        leaves = [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]
        out = call(*leaves)
        wrt = [t for t in leaves if t.requires_grad]
        outs = [o for o in torch.utils._pytree.tree_leaves(out)
                if isinstance(o, torch.Tensor) and o.requires_grad]
        if not wrt or not outs:
            return out, ()
        g = torch.Generator().manual_seed(1)
        cotangents = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
        grads = torch.autograd.grad(outs, wrt, cotangents, allow_unused=True)
        return out, tuple(torch.zeros_like(t) if d is None else d for t, d in zip(wrt, grads))

    return run


def run_sample(op, sample, dtype_name, grad=False):
    """One record: {"result": ..., "detail": ...}."""
    import warnings

    import torch
    import ember
    from ember.compiler.diagnostics import reset as reset_warnings
    from ember.runtime.compiled_graph import CompiledGraph

    tree = (sample.input, sample.args, sample.kwargs)
    leaves, spec = torch.utils._pytree.tree_flatten(tree)
    positions = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]

    def rebuild(tensors):
        values = list(leaves)
        for i, t in zip(positions, tensors):
            values[i] = t
        return torch.utils._pytree.tree_unflatten(values, spec)

    fn = _as_user_code(op.op)

    def call(*tensors):
        x, args, kwargs = rebuild(tensors)
        return fn(x, *args, **kwargs)

    tensors = [leaves[i] for i in positions]
    compiled_call = ember.compile(call, dynamic=False)
    if grad:  # the whole training step: forward and backward, eager and compiled
        call, compiled_call = _with_gradients(call), _with_gradients(compiled_call)
    try:
        expected = call(*[t.clone() for t in tensors])
        eager_error = None
    except Exception as exc:
        expected, eager_error = None, exc
    torch._dynamo.reset()
    reset_warnings()  # each sample tells its own fallbacks
    ran = []  # kernels that ran (a cached kernel counts: compiling is not the point)
    real_call = CompiledGraph.__call__

    def counting_call(self, *args):
        if self.kernel is not None:
            ran.append(self)
        return real_call(self, *args)

    CompiledGraph.__call__ = counting_call
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            actual = compiled_call(*[t.clone() for t in tensors])
    except Exception as exc:
        if eager_error is not None:
            return {"result": "PASS" if type(exc) is type(eager_error) or
                    isinstance(exc, RuntimeError) else "RAISED",
                    "detail": f"eager raised too: {type(eager_error).__name__}"}
        first = (str(exc).splitlines() or [""])[0][:300]
        return {"result": "RAISED", "detail": f"{type(exc).__name__}: {first}"}
    finally:
        CompiledGraph.__call__ = real_call
    if eager_error is not None:
        return {"result": "WRONG", "detail": f"eager raised {type(eager_error).__name__}: "
                                             f"{str(eager_error)[:200]}, ember did not"}
    problem = _compare(actual, expected, dtype_name, _values_only(op))
    # Low precision, and gradients (of ill-conditioned ops: eager's own float32 gradient
    # may be off by more than the tolerance), are judged against float64.
    if problem and (dtype_name != "float32" or grad) and "values differ" in problem:
        reference = _in_float64(call, tensors)
        if reference is not None and _within_reference(actual, expected, reference, dtype_name,
                                                       elementwise=not grad):
            problem = None
    if problem:
        return {"result": "WRONG", "detail": problem}
    ours = [str(w.message).splitlines()[0] for w in caught if "ember" in str(w.message)]
    if ours:
        return {"result": "FALLBACK", "detail": ours[0][:300]}
    return {"result": "PASS" if ran else "NOKERNEL", "detail": ""}


def _child(dtype_name, fd, grad=False):
    """Serve jobs "op_index sample_index" from stdin; one JSON line per job on `fd` (the
    child's stdout is not used: compilers print)."""
    import torch

    out = os.fdopen(fd, "w")
    ops = _ops(dtype_name, grad=grad)
    dtype = getattr(torch, dtype_name)
    cache = {}
    for line in sys.stdin:
        op_index, sample_index = map(int, line.split())
        op = ops[op_index]
        try:
            if op_index not in cache:
                cache.clear()
                torch.manual_seed(0)
                cache[op_index] = list(op.sample_inputs("cpu", dtype, requires_grad=grad))
            record = run_sample(op, cache[op_index][sample_index], dtype_name, grad)
        except Exception as exc:  # the harness itself, not ember
            record = {"result": "RAISED", "detail": f"harness: {type(exc).__name__}: {exc}"[:300]}
        out.write(json.dumps(record) + "\n")
        out.flush()


def _count_samples(ops, dtype_name, limit, grad=False):
    import torch

    dtype = getattr(torch, dtype_name)
    jobs = []
    for index, op in ops:
        torch.manual_seed(0)
        try:
            n = len(list(op.sample_inputs("cpu", dtype, requires_grad=grad)))
        except Exception:
            n = 0
        jobs.extend((index, s) for s in range(min(n, limit)))
    return jobs


# --- the parent: schedules, isolates, reports ------------------------------------------------

class _Worker:
    def __init__(self, dtype_name, timeout, grad=False):
        self.dtype_name, self.timeout, self.grad = dtype_name, timeout, grad
        self.proc = None
        self.job = None
        self.started = 0.0
        self.stderr = subprocess.DEVNULL

    def start(self):
        read_fd, write_fd = os.pipe()
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        command = [sys.executable, "-m", "ember.tools.opinfo_sweep", "--child", str(write_fd),
                   "--dtype", self.dtype_name] + (["--grad"] if self.grad else [])
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=self.stderr, pass_fds=(write_fd,), env=env, text=True)
        os.close(write_fd)
        self.reader = os.fdopen(read_fd, "r")

    def send(self, job):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.job, self.started = job, time.time()
        self.proc.stdin.write(f"{job[0]} {job[1]}\n")
        self.proc.stdin.flush()

    def receive(self):
        line = self.reader.readline()
        if line:
            return json.loads(line)
        code = self.proc.wait()
        self.proc = None
        return {"result": "CRASH", "detail": f"worker died (status {code})"}

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def sweep(dtype_name="float32", samples=3, jobs=2, names=None, every=1, timeout=300,
          progress=True, grad=False):
    """Run the sweep; return the list of records (op, sample, result, detail)."""
    import selectors

    all_ops = _ops(dtype_name, grad=grad)
    chosen = set(id(o) for o in _ops(dtype_name, names, every, grad))
    indexed = [(i, o) for i, o in enumerate(all_ops) if id(o) in chosen]
    queue = collections.deque(_count_samples(indexed, dtype_name, samples, grad))
    total = len(queue)
    records = []
    workers = [_Worker(dtype_name, timeout, grad) for _ in range(max(1, jobs))]
    selector = selectors.DefaultSelector()
    busy = {}
    start = time.time()

    def dispatch(worker):
        if queue:
            worker.send(queue.popleft())
            selector.register(worker.reader, selectors.EVENT_READ, worker)
            busy[worker] = True

    for w in workers:
        dispatch(w)
    while busy:
        events = selector.select(timeout=5)
        now = time.time()
        finished = [key.data for key, _ in events]
        for w in list(busy):
            if w not in finished and now - w.started > timeout:
                w.kill()
                finished.append(w)
        for w in finished:
            selector.unregister(w.reader)
            busy.pop(w, None)
            record = w.receive() if w.proc is not None else {
                "result": "CRASH", "detail": f"timed out after {timeout}s"}
            op = all_ops[w.job[0]]
            record.update(op=_full_name(op), sample=w.job[1])
            records.append(record)
            if w.proc is None:
                w.reader.close()
            if progress and (len(records) % 50 == 0 or len(records) == total):
                sys.stderr.write(f"opinfo sweep: {len(records)}/{total} samples, "
                                 f"{time.time() - start:.0f}s\n")
            dispatch(w)
    for w in workers:
        w.kill()
    return records


def report(records, wall, out=sys.stdout):
    counts = collections.Counter(r["result"] for r in records)
    out.write(f"OpInfo sweep: {len(records)} samples in {wall:.0f}s\n")
    for kind in ("PASS", "NOKERNEL", "FALLBACK", "WRONG", "RAISED", "CRASH"):
        out.write(f"  {kind:9s} {counts.get(kind, 0)}\n")
    bad = [r for r in records if r["result"] in ("WRONG", "RAISED", "CRASH")]
    if bad:
        out.write("failing samples:\n")
        for r in bad:
            out.write(f"  {r['result']:7s} {r['op']}[{r['sample']}]: {r['detail']}\n")
    by_op = collections.Counter(r["op"] for r in records if r["result"] == "FALLBACK")
    if by_op:
        out.write("fallbacks by op (samples):\n")
        for op, n in by_op.most_common():
            reason = next(r["detail"] for r in records if r["op"] == op and r["result"] == "FALLBACK")
            out.write(f"  {n:3d} {op}: {reason[:160]}\n")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ember.tools.opinfo_sweep",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", default="float32", choices=sorted(TOLERANCE))
    p.add_argument("--samples", type=int, default=3, help="first N samples per op")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--ops", default=None, help="comma-separated OpInfo names")
    p.add_argument("--every", type=int, default=1, help="every k-th op only")
    p.add_argument("--timeout", type=int, default=300, help="seconds per sample")
    p.add_argument("--json", default=None, help="write all records to this file")
    p.add_argument("--grad", action="store_true",
                   help="compare gradients too (ops that support autograd)")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        _child(args.dtype, args.child, args.grad)
        return 0
    names = set(args.ops.split(",")) if args.ops else None
    start = time.time()
    records = sweep(args.dtype, args.samples, args.jobs, names, args.every, args.timeout,
                    grad=args.grad)
    report(records, time.time() - start)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    bad = sum(r["result"] in ("WRONG", "RAISED", "CRASH") for r in records)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
