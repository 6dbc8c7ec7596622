"""Capture: the decomposition table AOTAutograd applies before import.

torch-mlir's own table (ops it prefers decomposed) plus the composite ops that must
reach linalg as simpler ATen ops: batch/layer/group norm, gelu, softmax, embedding, ...
"""
import torch
from torch._decomp import get_decompositions
from torch_mlir.extras.fx_decomp_util import get_decomposition_table as _torch_mlir_table

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
]


# torch's decompositions of these emit prims (broadcast_in_dim) that torch-mlir cannot
# take; torch-mlir decomposes the ATen ops itself.
_KEEP = [aten.native_layer_norm, aten.native_group_norm]


def decomposition_table():
    table = dict(_torch_mlir_table())
    table.update(get_decompositions(_EXTRA))
    for op in _KEEP:
        for overload in op.overloads():
            table.pop(getattr(op, overload), None)
    return table
