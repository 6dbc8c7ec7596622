"""cdist / pdist with the arithmetic eager uses (torch-mlir lowers neither).

    _cdist_forward(x1, x2, p, mode) -> d = |x1[..., :, None, :] - x2[..., None, :, :]|
                                       p = 0: (d != 0).sum(-1);  p = 1: d.sum(-1);
                                       p = inf: d.amax(-1);      else (d^p).sum(-1)^(1/p)
                                       p = 2 where eager uses the matmul form (mode 1, or
                                       mode 0 with more than 25 rows): sqrt(clamp(|a|^2 -
                                       2 a.b + |b|^2, 1e-30)) as ATen's _euclidean_dist
    _pdist_forward(x, p)            -> the same distances of the rows of x, pairs i < j
                                       in row-major order (gathered with triu_indices)
"""
import math

import torch

aten = torch.ops.aten
_MM_IF_NECESSARY, _MM_ALWAYS = 0, 1


def _pairwise(x1, x2, p):
    d = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return (d != 0).sum(-1).to(x1.dtype)
    if p == 1:
        return d.sum(-1)
    if math.isinf(p):
        return d.amax(-1)
    if p == 2:
        return (d * d).sum(-1).sqrt()
    return d.pow(p).sum(-1).pow(1.0 / p)


def _euclidean(x1, x2):
    x1_norm = (x1 * x1).sum(-1, keepdim=True)
    x2_norm = (x2 * x2).sum(-1, keepdim=True)
    squared = x1_norm - 2 * torch.matmul(x1, x2.transpose(-2, -1)) + x2_norm.transpose(-2, -1)
    return squared.clamp_min(1e-30).sqrt()


def _cdist_forward(x1, x2, p, compute_mode=None):
    if not x1.dtype.is_floating_point or x1.shape[-1] == 0 or x1.numel() == 0 or x2.numel() == 0:
        return NotImplemented
    mode = _MM_IF_NECESSARY if compute_mode is None else compute_mode
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    if p == 2 and (mode == _MM_ALWAYS or (mode == _MM_IF_NECESSARY and (rows1 > 25 or rows2 > 25))):
        return _euclidean(x1, x2)
    return _pairwise(x1, x2, p)


def _pdist_forward(x, p=2):
    n = x.shape[0]
    if not x.dtype.is_floating_point or n < 2 or x.shape[1] == 0:
        return NotImplemented
    rows, cols = torch.triu_indices(n, n, 1, device=x.device)
    return _pairwise(x, x, p)[rows, cols]


DISTANCE_DECOMPOSITIONS = {
    aten._cdist_forward.default: _cdist_forward,
    aten._pdist_forward.default: _pdist_forward,
}
