"""The multi-tensor (`_foreach_*`) ops of torch's optimizers as one ATen op per tensor.

`torch.optim` steps with `foreach=True` (the default on CPU) call `_foreach_add`,
`_foreach_addcmul`, `_foreach_lerp`, `_foreach_sqrt`, ... on lists of tensors; torch has
no decomposition for them and torch-mlir no lowering. Each becomes its per-tensor op
(`_foreach_addcmul.Scalar(xs, ys, zs, v)` -> `[addcmul(x, y, z, value=v) ...]`): ember
then fuses each parameter's whole update chain into one loop nest.

    before: out = _foreach_mul.Scalar([p0, p1], 0.9)
    after:  out = [mul.Tensor(p0, 0.9), mul.Tensor(p1, 0.9)]
"""
import torch

aten = torch.ops.aten

def _norm(x, ord=2, dtype=None):
    return aten.linalg_vector_norm(x, ord, dtype=dtype)


# _foreach_<name> -> the per-tensor op where the name alone does not say it.
_BASE = {"norm": _norm, "zero": aten.zeros_like, "copy": aten.copy}


def _positional_count(base):
    """How many leading arguments every overload of `base` takes by position (addcmul:
    3; its `value` is keyword-only, where _foreach_addcmul takes it by position)."""
    if not isinstance(base, torch._ops.OpOverloadPacket):
        return None
    counts = [sum(1 for a in getattr(base, o)._schema.arguments if not a.kwarg_only)
              for o in base.overloads() if o != "out" and not o.endswith("_out")]
    return min(counts) if counts else None


def _is_list(value):
    return isinstance(value, (list, tuple))


def _per_tensor(base, name, op):
    names = [a.name for a in op._schema.arguments]
    positional = _positional_count(base)

    def decomposition(*args, **kwargs):
        if name in ("addcmul", "addcdiv") and op._overloadname == "Tensor":
            return NotImplemented  # a tensor of per-element scalars: ATen runs it
        if positional is not None and len(args) > positional:
            # trailing positional arguments the per-tensor op takes by keyword
            kwargs = {**{names[j]: args[j] for j in range(positional, len(args))}, **kwargs}
            args = args[:positional]
        lengths = {len(a) for a in list(args) + list(kwargs.values()) if _is_list(a)}
        if len(lengths) != 1:
            return NotImplemented
        (n,) = lengths
        pick = lambda a, i: a[i] if _is_list(a) else a  # noqa: E731
        out = []
        for i in range(n):
            call_args = [pick(a, i) for a in args]
            call_kwargs = {k: pick(v, i) for k, v in kwargs.items()}
            if name == "zero":
                out.append(base(call_args[0]))
            elif name == "copy":  # copy(self, src, non_blocking) keeps self's dtype
                out.append(base(call_args[0], call_args[1]))
            else:
                out.append(base(*call_args, **call_kwargs))
        return out

    return decomposition


def _foreach_ops():
    for name in dir(aten):
        if not name.startswith("_foreach_") or name.endswith("_"):
            continue
        short = name[len("_foreach_"):]
        base = _BASE.get(short, getattr(aten, short, None))
        if base is None:
            continue
        packet = getattr(aten, name)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            yield op, _per_tensor(base, short, op)


def _fma(a, b, c):
    """Dynamo writes `x.addcmul_(y, z, value=v)` / `addcdiv_` (single-tensor optimizers)
    as mul/div + prims.fma; torch-mlir has no fma: a * b + c (LLVM may contract it)."""
    return a * b + c


FOREACH_DECOMPOSITIONS = dict(_foreach_ops())
# prims.fma is registered by inductor's prims module, which Dynamo usually (not always)
# has imported by the time a backend runs.
import torch._inductor.inductor_prims  # noqa: E402,F401

FOREACH_DECOMPOSITIONS[torch.ops.prims.fma.default] = _fma
