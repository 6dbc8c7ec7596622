"""uint8 tensors are computed as int32 and the results cast back.

torch-mlir's lowerings read ui8 as signed i8 in many places: `img / 2` gave -28 for 200,
and sort, topk, clamp, abs and prod of uint8 tensors were wrong. Widening is exact (0..255
fit int32), and casting a result back to uint8 keeps its low 8 bits, which is uint8's own
wrap-around for +, -, *, negation and shifts:

    before: %y = aten.div.Tensor(%img : u8, 2)                          -> f32
            %s = aten.clamp(%img : u8, 5, 250)                          -> u8
    after:  %w = prims.convert_element_type(%img, torch.int32)
            %y = prims.convert_element_type(aten.div.Tensor(%w, 2), torch.float32)
            %s = prims.convert_element_type(aten.clamp(%w, 5, 250), torch.uint8)

Only pointwise ops, reductions, scans and orders are widened (other ops may still run
through ATen, whose kernels may take uint8 but not int32); views, casts, ops that mutate
an input and indexing (a uint8 index is a mask) are left alone, and so are random ops
(they run through ATen).
"""
import operator

import torch

from .fx_meta import refresh_meta, value_of
from .graph_outputs import MULTI_VIEW_OPS, VIEW_OPS

aten = torch.ops.aten
_CONVERT = torch.ops.prims.convert_element_type.default
_KEPT = VIEW_OPS | MULTI_VIEW_OPS | {
    _CONVERT, aten._to_copy.default, aten.index.Tensor, aten._unsafe_index.Tensor,
    aten.index_put.default, aten._unsafe_index_put.default, aten.masked_fill.Tensor,
    aten.masked_fill.Scalar, aten.where.self, operator.getitem}


def _is_uint8(node):
    value = value_of(node)
    return isinstance(value, torch.Tensor) and value.dtype == torch.uint8


# Beyond pointwise ops (torch.Tag.pointwise), the ops widened: reductions, scans, orders.
_REDUCTIONS = {aten.amax, aten.amin, aten.max, aten.min, aten.argmax, aten.argmin, aten.sort,
               aten.topk, aten.prod, aten.sum, aten.mean, aten.cummax, aten.cummin,
               aten.cumsum, aten.cumprod, aten.kthvalue, aten.median, aten.flip, aten.cat}


def _widens(node, runs_in_aten):
    if node.op != "call_function" or node.target in _KEPT or runs_in_aten(node):
        return False
    if not isinstance(node.target, torch._ops.OpOverload) or not (
            torch.Tag.pointwise in node.target.tags or node.target.overloadpacket in _REDUCTIONS):
        return False  # e.g. _upsample_bilinear2d_aa: ATen takes uint8, not int32
    if node.target._schema.is_mutable:
        return False
    return any(_is_uint8(a) for a in node.all_input_nodes)


def _cast_back(graph, node, value):
    """Give `node`'s users its result in the dtype it had before widening."""
    if not isinstance(value, torch.Tensor):
        return
    with graph.inserting_after(node):
        back = graph.call_function(_CONVERT, (node, value.dtype))
    back.meta["val"] = value  # a later op reading it widens it again (its low 8 bits)
    for user in list(node.users):
        if user is not back:
            user.replace_input_with(node, back)


def widen_uint8(gm, runs_in_aten):
    """Rewrite `gm` in place (see the module docstring); True if anything changed. Ops for
    which `runs_in_aten(node)` keep their uint8 inputs: ATen reads them right, and some of
    its kernels take uint8 but not int32 (_upsample_bilinear2d_aa)."""
    graph = gm.graph
    nodes = [n for n in graph.nodes if _widens(n, runs_in_aten)]
    for node in nodes:
        before = value_of(node)
        with graph.inserting_before(node):
            wide = {a: graph.call_function(_CONVERT, (a, torch.int32))
                    for a in node.all_input_nodes if _is_uint8(a)}
        node.args = torch.fx.node.map_arg(node.args, lambda a: wide.get(a, a))
        node.kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: wide.get(a, a))
        if isinstance(before, torch.Tensor):
            _cast_back(graph, node, before)
        else:  # (values, indices) of sort / topk / max.dim: behind each getitem
            for user in list(node.users):
                if user.target is operator.getitem:
                    _cast_back(graph, user, value_of(user))
    if nodes:
        refresh_meta(gm)
    return bool(nodes)
