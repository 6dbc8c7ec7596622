"""Ops on constant 0-d tensors are computed here, in Python, before torch-mlir sees them.

torch-mlir's folders misread a constant 0-d float tensor: `lt.Scalar(scalar_tensor(1.1), 0)`
folded to true in some runs and false in others (eq and gt too), so a floor division by
1.1 (whose decomposition asks `divisor < 0`) was off by one now and then. Decompositions
make such constants often (a Python number as a tensor operand). An op whose every tensor
input is such a constant, and whose result is one 0-d tensor, is evaluated on the real
values and replaced by a constant of its result:

    before: %c = aten.scalar_tensor(1.1);  %n = aten.lt.Scalar(%c, 0);  %y = aten.mul(%x, %n)
    after:  %n = aten.scalar_tensor(False, dtype=torch.bool);           %y = aten.mul(%x, %n)
"""
import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from .extern_ops import is_pure
from .fx_meta import value_of

aten = torch.ops.aten

_SCALAR_DTYPES = {torch.float32, torch.float64, torch.int64, torch.int32, torch.int16,
                  torch.int8, torch.uint8, torch.bool}


def _evaluate(node, constants):
    """The node's value from constant inputs (on the CPU), or None."""
    if node.op != "call_function" or not is_pure(node.target):
        return None
    if node.target is not aten.scalar_tensor.default and not node.all_input_nodes:
        return None  # a factory of its own (full, arange): left to torch-mlir
    if any(a not in constants for a in node.all_input_nodes):
        return None
    out = value_of(node)
    if not isinstance(out, torch.Tensor) or out.dim() != 0 or out.dtype not in _SCALAR_DTYPES:
        return None
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: constants[a])
    if "device" in kwargs:
        kwargs = {**kwargs, "device": "cpu"}
    try:
        value = node.target(*args, **kwargs)
    except Exception:
        return None
    if not isinstance(value, torch.Tensor) or value.shape != () or value.dtype != out.dtype:
        return None
    return value


def fold_constant_scalars(gm):
    """Rewrite `gm` in place (see the module docstring); True if anything changed."""
    graph = gm.graph
    constants = {}
    folded = []
    with unset_fake_temporarily():  # AOTAutograd's fake mode is active here
        for node in list(graph.nodes):
            value = _evaluate(node, constants)
            if value is None:
                continue
            constants[node] = value
            if node.target is aten.scalar_tensor.default:
                continue
            with graph.inserting_before(node):
                const = graph.call_function(aten.scalar_tensor.default, (value.item(),), {
                    "dtype": value.dtype, "device": value_of(node).device})
            const.meta = dict(node.meta)
            constants[const] = value
            node.replace_all_uses_with(const)
            folded.append(node)
    for node in reversed(list(graph.nodes)):
        if node in constants and not node.users:
            graph.erase_node(node)
    if folded:
        gm.recompile()
    return bool(folded)
