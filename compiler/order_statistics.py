"""median / nanmedian / kthvalue as a stable sort (ember-lower-tm-tensor's merge sort, NaN
last) and a gather, with eager's indices.

ATen's CPU kernels select with nth_element under the order (value, index) (median,
nanmedian) or pick the k-th smallest with NaN above everything (kthvalue): a stable
ascending sort with NaN last puts the same element at the same position.

    median(x, dim)    -> v, i = sort(x, dim, stable); n_nan = isnan(x).sum(dim)
                         p = n_nan ? n - n_nan (eager returns the first NaN) : (n - 1) / 2
                         (v.gather(dim, p), i.gather(dim, p))
    nanmedian(x, dim) -> p = max((n - n_nan - 1) / 2, 0): the median of the numbers
    kthvalue(x, k)    -> p = k - 1
    median(x)         -> median(x.flatten(), 0).values (NaN if there is any)
"""
import torch

aten = torch.ops.aten


def _zero_index(x):
    return torch.zeros((), dtype=torch.int64, device=x.device)


def _select_sorted(x, dim, keepdim, position_of):
    """(value, index) at position_of(n, nan_count) of x stably sorted along dim."""
    dim = dim % x.dim()
    n = x.shape[dim]
    values, indices = torch.sort(x, dim=dim, stable=True)
    nan_count = torch.isnan(x).sum(dim, keepdim=True) if x.dtype.is_floating_point else None
    position = position_of(n, nan_count)
    if not isinstance(position, torch.Tensor):
        shape = list(x.shape)
        shape[dim] = 1
        position = torch.full(shape, position, dtype=torch.int64, device=x.device)
    value, index = values.gather(dim, position), indices.gather(dim, position)
    if not keepdim:
        value, index = value.squeeze(dim), index.squeeze(dim)
    return value, index


def _median_position(ignore_nan):
    def position(n, nan_count):
        middle = (n - 1) // 2
        if nan_count is None:
            return middle
        if ignore_nan:
            return torch.clamp((n - nan_count - 1) // 2, min=0)
        return torch.where(nan_count > 0, n - nan_count, middle)
    return position


def _median_dim(ignore_nan):
    def decomposition(x, dim=0, keepdim=False):
        if x.dim() == 0:
            return x.clone(), _zero_index(x)
        if x.shape[dim] == 0 or x.dtype == torch.bool:
            return NotImplemented  # eager raises (empty) or has no kernel
        return _select_sorted(x, dim, keepdim, _median_position(ignore_nan))
    return decomposition


def _median_all(ignore_nan):
    def decomposition(x):
        if x.numel() == 0 or x.dtype == torch.bool:
            return NotImplemented
        return _select_sorted(x.reshape(-1), 0, False, _median_position(ignore_nan))[0]
    return decomposition


def _kthvalue(x, k, dim=-1, keepdim=False):
    if x.dim() == 0:
        return x.clone(), _zero_index(x)
    if not 0 < k <= x.shape[dim] or x.dtype == torch.bool:
        return NotImplemented  # eager raises "selected index k out of range"
    return _select_sorted(x, dim, keepdim, lambda n, nan_count: k - 1)


ORDER_STATISTICS = {
    aten.median.dim: _median_dim(ignore_nan=False),
    aten.nanmedian.dim: _median_dim(ignore_nan=True),
    aten.median.default: _median_all(ignore_nan=False),
    aten.nanmedian.default: _median_all(ignore_nan=True),
    aten.kthvalue.default: _kthvalue,
}
