"""Decompositions that keep eager's NaN semantics where torch-mlir's lowering loses them.

torch-mlir lowers clamp / maximum / minimum through ordered compares or max/min ops that
turn NaN into a number (clamp(NaN, -1, 1) gave -1), and argmax/argmin through a compare
that skips NaN. Eager propagates NaN and ranks it above every number (argmax of a row
with NaN is the first NaN). As selects and reductions that import as plain linalg:

    clamp(x, lo, hi) -> where(x > hi | isnan(hi), hi, where(x < lo | isnan(lo), lo, x))
    argmax(x, d)     -> amin(where(x == amax(x, d) | isnan(x), arange(n), n), d)

fmax / fmin / hypot, which torch-mlir leaves as `torch.operator`, are written the same way
with eager's rules: fmax/fmin ignore a NaN operand, hypot(inf, NaN) is inf.
"""
import torch

aten = torch.ops.aten


def _select_bound(out, bound, outside):
    """where(outside | isnan(bound), bound, out); a scalar bound's NaN test runs here."""
    if isinstance(bound, torch.Tensor):
        return torch.where(outside | torch.isnan(bound), bound, out)
    if bound != bound:  # NaN scalar bound: every element is NaN
        return torch.full_like(out, bound, dtype=torch.result_type(out, bound))
    return torch.where(outside, bound, out)


def _clamp(x, min=None, max=None):
    """`x < lo` is false for NaN, so NaN passes through; a NaN bound gives NaN."""
    out = x
    if min is not None:
        out = _select_bound(out, min, out < min)
    if max is not None:
        out = _select_bound(out, max, out > max)
    return out


def _clamp_min(x, min):
    return _clamp(x, min=min)


def _clamp_max(x, max):
    return _clamp(x, max=max)


def _maximum(a, b):
    """NaN in either operand gives NaN (eager's maximum), ties give either (equal)."""
    return torch.where((a > b) | torch.isnan(a), a, b)


def _minimum(a, b):
    return torch.where((a < b) | torch.isnan(a), a, b)


def _arg_extreme(x, dim, keepdim, extreme):
    """First index of the extreme value along dim, NaN counting as the extreme."""
    if dim is None:
        x, dim = x.reshape(-1), 0
        keep = False
    else:
        keep = keepdim
    dim = dim % max(x.dim(), 1)
    if x.dim() == 0:
        return torch.zeros((), dtype=torch.int64, device=x.device)
    n = x.shape[dim]
    best = extreme(x, dim, keepdim=True)
    hit = (x == best) | (x != x)
    shape = [1] * x.dim()
    shape[dim] = n
    index = torch.arange(n, device=x.device).reshape(shape)
    return torch.amin(torch.where(hit, index, n), dim, keepdim=keep)


def _argmax(x, dim=None, keepdim=False):
    return _arg_extreme(x, dim, keepdim, torch.amax)


def _argmin(x, dim=None, keepdim=False):
    return _arg_extreme(x, dim, keepdim, torch.amin)


def _max_dim(x, dim, keepdim=False):
    return torch.amax(x, dim, keepdim=keepdim), _argmax(x, dim, keepdim)


def _min_dim(x, dim, keepdim=False):
    return torch.amin(x, dim, keepdim=keepdim), _argmin(x, dim, keepdim)


def _fmax(a, b):
    """The other operand where one is NaN (NaN only if both are)."""
    return torch.where(torch.isnan(b) | (a > b), a, b)


def _fmin(a, b):
    return torch.where(torch.isnan(b) | (a < b), a, b)


def _hypot(a, b):
    """max * sqrt(1 + (min / max)^2): no overflow of a*a; 0 for (0, 0); inf wins over NaN."""
    x, y = torch.abs(a), torch.abs(b)
    big, small = torch.maximum(x, y), torch.minimum(x, y)
    ratio = small / big
    out = big * torch.sqrt(1 + ratio * ratio)
    out = torch.where(big == 0, torch.zeros_like(out), out)
    return torch.where(torch.isinf(x) | torch.isinf(y), torch.full_like(out, float("inf")), out)


NAN_DECOMPOSITIONS = {
    aten.clamp.default: _clamp, aten.clamp.Tensor: _clamp,
    aten.clamp_min.default: _clamp_min, aten.clamp_min.Tensor: _clamp_min,
    aten.clamp_max.default: _clamp_max, aten.clamp_max.Tensor: _clamp_max,
    aten.maximum.default: _maximum, aten.minimum.default: _minimum,
    aten.argmax.default: _argmax, aten.argmin.default: _argmin,
    aten.max.dim: _max_dim, aten.min.dim: _min_dim,
    aten.fmax.default: _fmax, aten.fmin.default: _fmin, aten.hypot.default: _hypot,
}
