"""cummax / cummin (torch-mlir has no lowering) as a log-step scan of (value, index) pairs.

Step s combines each position with the one s places earlier (identity padding in front):

    before: %v, %i = aten.cummax(%x, 1)
    after:  v, i = x, arange(n);  for s in 1, 2, 4, ... < n:
              ev, ei = cat([-inf] * s, v[:-s]), cat([0] * s, i[:-s])    (the earlier half)
              later = isnan(v) | ((v >= ev) & ~isnan(ev))
              v, i = where(later, v, ev), where(later, i, ei)

The combine is associative and equals eager's sequential rule (`isnan(x) || x >= max`
takes x and its index): ties and NaN take the later index; once NaN appears it stays.

logcumsumexp takes the same scan with logaddexp as the combine (-inf padding), where
torch-mlir's log(cumsum(exp(x))) overflows: m + log1p(exp(-|a - b|)), m = max(a, b).
"""
import torch

aten = torch.ops.aten


def _shift(t, dim, step, fill):
    pad_shape = list(t.shape)
    pad_shape[dim] = step
    pad = torch.full(pad_shape, fill, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t.narrow(dim, 0, t.shape[dim] - step)], dim)


def _cumulative_extreme(x, dim, larger):
    if x.dtype == torch.bool or x.numel() == 0:
        return NotImplemented
    if x.dim() == 0:  # the value itself, at index 0
        return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
    dim = dim % x.dim()
    n = x.shape[dim]
    if x.dtype.is_floating_point:
        identity = float("-inf") if larger else float("inf")
    else:
        info = torch.iinfo(x.dtype)
        identity = info.min if larger else info.max
    shape = [1] * x.dim()
    shape[dim] = n
    value = x.clone()
    index = torch.arange(n, device=x.device).reshape(shape).expand(x.shape).contiguous()
    step = 1
    while step < n:
        earlier_value = _shift(value, dim, step, identity)
        earlier_index = _shift(index, dim, step, 0)
        beats = (value >= earlier_value) if larger else (value <= earlier_value)
        later = torch.isnan(value) | (beats & ~torch.isnan(earlier_value))
        value = torch.where(later, value, earlier_value)
        index = torch.where(later, index, earlier_index)
        step *= 2
    return value, index


def _logaddexp(a, b):
    big = torch.maximum(a, b)
    out = big + torch.log1p(torch.exp(-torch.abs(a - b)))
    return torch.where(torch.isinf(big) & (a == b), big, out)  # -inf,-inf and inf,inf


def _logcumsumexp(x, dim):
    if not x.dtype.is_floating_point or x.numel() == 0:
        return NotImplemented
    if x.dim() == 0:
        return x.clone()
    dim = dim % x.dim()
    value, step, n = x.clone(), 1, x.shape[dim]
    while step < n:
        value = _logaddexp(value, _shift(value, dim, step, float("-inf")))
        step *= 2
    return value


def _cummax(x, dim):
    return _cumulative_extreme(x, dim, larger=True)


def _cummin(x, dim):
    return _cumulative_extreme(x, dim, larger=False)


CUMULATIVE_EXTREMA = {aten.cummax.default: _cummax, aten.cummin.default: _cummin,
                      aten.logcumsumexp.default: _logcumsumexp}
