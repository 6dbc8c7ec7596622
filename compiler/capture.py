"""Capture: the decomposition table AOTAutograd applies before import.

torch-mlir's own table (ops it prefers decomposed) plus the composite ops that must
reach linalg as simpler ATen ops: batch/layer/group norm, gelu, softmax, embedding, ...
"""
import torch
from torch._decomp import get_decompositions
from torch_mlir.extras.fx_decomp_util import get_decomposition_table as _torch_mlir_table

from .batch_norm_decomposition import make_batch_norm_decompositions
from .conv_decomposition import convolution
from .nan_decompositions import NAN_DECOMPOSITIONS

aten = torch.ops.aten

_EXTRA = [
    aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional,
    aten.native_batch_norm,
    aten.gelu,
    aten._softmax,
    aten._log_softmax,
    aten.embedding,
    aten.silu,
    aten.hardswish,
    aten.hardsigmoid,
    aten.mish,
    aten.addmm,
    aten.linear,
    aten.t,
    aten.native_dropout,
    aten.upsample_nearest2d,
    aten.rsub,
    aten.glu,
    aten.logsumexp,
    aten.var_mean,
    aten.addcmul,
    aten.addcdiv,
    aten.leaky_relu,
    aten.elu,
    aten.softplus,
    aten.hardtanh,
    aten.threshold_backward,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm_backward,
    aten.native_batch_norm_backward,
    aten.gelu_backward,
    aten.silu_backward,
    aten.embedding_dense_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    # ops torch-mlir leaves as torch.operator: their ATen decompositions lower fine
    aten.addmv,
    aten.hypot,
    aten.dist,
    aten.narrow_copy,
    aten.copysign,
    aten.diagonal_scatter,
    aten.view_copy,
    aten.as_strided_copy,
    aten.logaddexp,
    aten.logaddexp2,
    aten.fmax,
    aten.fmin,
    aten.linalg_vector_norm,
]


# torch's decompositions of these emit prims (broadcast_in_dim) that torch-mlir cannot
# take; torch-mlir decomposes the ATen ops itself.
_KEEP = [aten.native_layer_norm, aten.native_group_norm]


def _cumsum(x, dim, *, dtype=None):
    """cumsum as a masked sum: y[..., i] = sum_j x[..., j] * (j <= i).

    torch-mlir lowers cumsum to a TMTensor scan that our linalg pipeline cannot take;
    this form is plain broadcast + reduction (quadratic in the scanned size, which is
    fine for the mask/position computations where models use it)."""
    if dtype is None:
        dtype = torch.int64 if not x.dtype.is_floating_point else x.dtype
    dim = dim % max(x.dim(), 1)
    if x.dim() == 0:
        return x.to(dtype)
    n = x.shape[dim]
    moved = x.to(dtype).movedim(dim, -1).unsqueeze(-2)  # (..., 1, n)
    idx = torch.arange(n, device=x.device)
    mask = (idx.unsqueeze(0) <= idx.unsqueeze(1)).to(dtype)  # [i, j] = j <= i
    return (moved * mask).sum(-1).movedim(-1, dim)


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    """(var, mean) from two reductions; torch's decomposition emits prims torch-mlir lacks."""
    dims = list(range(x.dim())) if dim is None or len(dim) == 0 else [d % max(x.dim(), 1) for d in dim]
    count = 1
    for d in dims:
        count *= x.shape[d] if x.dim() else 1
    mean = x.mean(dims, keepdim=True) if x.dim() else x
    centered = x - mean
    var = (centered * centered).sum(dims, keepdim=keepdim) if x.dim() else centered * centered
    var = var / (count - (1 if correction is None else correction))
    return var, (mean if keepdim or not x.dim() else mean.squeeze(dims))


def _std_mean(x, dim=None, *, correction=None, keepdim=False):
    var, mean = _var_mean(x, dim, correction=correction, keepdim=keepdim)
    return torch.sqrt(var), mean


def decomposition_table():
    table = dict(_torch_mlir_table())
    table.update(get_decompositions(_EXTRA))
    for op in _KEEP:
        for overload in op.overloads():
            table.pop(getattr(op, overload), None)
    table[aten.cumsum.default] = _cumsum
    table[aten.convolution.default] = convolution
    table.update(NAN_DECOMPOSITIONS)
    table[aten.var_mean.correction] = _var_mean
    table[aten.std_mean.correction] = _std_mean
    table.update(make_batch_norm_decompositions(dict(table)))
    return table
