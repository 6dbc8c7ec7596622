"""0-d tensors under ops that take a `dim`, handed to torch-mlir as 1-element tensors.

torch-mlir's lowerings of amax / amin / logsumexp / cumsum / sort / scatter / max.dim ...
address dim 0 of their input, which a 0-d tensor lacks: the whole graph then fails to
legalize (a stray `torch.constant.int`). For a 0-d x, dim 0 and -1 mean the same on a
1-element 1-d view of it:

    before: %m = aten.amax(%x : f32[], [0], True)                   -> f32[]
    after:  %x1 = aten.reshape(%x, [1]);  %m1 = aten.amax(%x1, [0], True)
            %m = aten.reshape(%m1, [])                              -> f32[]
"""
import operator

import torch

from .fx_meta import refresh_meta, value_of as _val
from .graph_outputs import VIEW_OPS

aten = torch.ops.aten


def _is_scalar_tensor(value):
    return isinstance(value, torch.Tensor) and value.dim() == 0


def _dim_values(node):
    """The values given for the op's `dim` / `dims` arguments (None if it has none)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return None
    values = []
    for k, a in enumerate(schema.arguments):
        if a.name in ("dim", "dims"):
            given = node.args[k] if k < len(node.args) else node.kwargs.get(a.name)
            if given is not None:
                values.append(given)
    return values or None


def _takes_dim(node):
    """A dim argument that means 'the only axis' of a 1-element 1-d tensor (permute's
    dims=[] on a 0-d tensor does not)."""
    values = _dim_values(node)
    if values is None:
        return False
    flat = [d for v in values for d in (v if isinstance(v, (list, tuple)) else [v])]
    return bool(flat) and all(isinstance(d, int) and d in (0, -1) for d in flat)


def _wants_lift(node):
    if node.op != "call_function" or node.target in VIEW_OPS or not _takes_dim(node):
        return False
    ins = [_val(a) for a in node.all_input_nodes]
    outs = [v for v in torch.utils._pytree.tree_leaves(_val(node)) if isinstance(v, torch.Tensor)]
    tensor_ins = [v for v in ins if isinstance(v, torch.Tensor)]
    return (bool(tensor_ins) and bool(outs) and all(_is_scalar_tensor(v) for v in tensor_ins)
            and all(_is_scalar_tensor(v) for v in outs))


def lift_zero_dim(gm):
    """Rewrite `gm` in place (see the module docstring); True if anything changed."""
    graph = gm.graph
    nodes = [n for n in graph.nodes if _wants_lift(n)]
    for node in nodes:
        with graph.inserting_before(node):
            lifted = {a: graph.call_function(aten.reshape.default, (a, [1]))
                      for a in node.all_input_nodes if isinstance(_val(a), torch.Tensor)}
        node.args = torch.fx.node.map_arg(node.args, lambda a: lifted.get(a, a))
        node.kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: lifted.get(a, a))
        users = list(node.users)
        if isinstance(_val(node), torch.Tensor):
            with graph.inserting_after(node):
                back = graph.call_function(aten.reshape.default, (node, []))
            for u in users:
                u.replace_input_with(node, back)
        else:  # tuple results: reshape behind each getitem
            for u in users:
                if u.target is not operator.getitem:
                    continue
                with graph.inserting_after(u):
                    back = graph.call_function(aten.reshape.default, (u, []))
                for uu in list(u.users):
                    if uu is not back:
                        uu.replace_input_with(u, back)
    if nodes:
        refresh_meta(gm)
    return bool(nodes)
