"""FX (functionalized ATen) graph -> linalg-on-tensors, via torch-mlir's FX importer.

Failures are turned into EmberUnsupportedError naming the ATen op and its input shapes,
found by matching torch-mlir's diagnostics against the graph's nodes.
"""
import re

import torch
from torch_mlir import fx as torch_mlir_fx

from ember.errors import EmberUnsupportedError

ENTRY = "forward"
_SUPPORTED_DTYPES = {torch.float32, torch.float64, torch.int64, torch.int32, torch.bool,
                     torch.int8, torch.uint8, torch.int16}
_OP_IN_DIAGNOSTIC = re.compile(r"torch\.(aten|prims|prim)\.([A-Za-z0-9_]+)(\.[A-Za-z0-9_]+)?")


def _val(node):
    return node.meta.get("val", node.meta.get("example_value"))


def _describe(value):
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)}:{str(value.dtype).replace('torch.', '')}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    return repr(value)


def node_input_shapes(node):
    return ", ".join(_describe(_val(a)) if isinstance(a, torch.fx.Node) else repr(a)
                     for a in node.args)


def find_node(gm, op_name):
    """First call_function node whose target is ATen op `op_name` (e.g. 'aten.cumsum')."""
    base = op_name.split(".")[-1]
    for node in gm.graph.nodes:
        if node.op == "call_function":
            target = str(node.target)  # e.g. 'aten.cumsum.default'
            if target.split(".")[1:2] == [base] or target.startswith(op_name + "."):
                return node
    return None


def unsupported_from_message(gm, message):
    """Best EmberUnsupportedError for a torch-mlir failure message."""
    m = _OP_IN_DIAGNOSTIC.search(message)
    if m:
        op = f"aten.{m.group(2)}" if m.group(1) == "aten" else f"{m.group(1)}.{m.group(2)}"
        node = find_node(gm, op)
        shapes = node_input_shapes(node) if node is not None else ""
        return EmberUnsupportedError(op, shapes, _first_line(message))
    return EmberUnsupportedError("the graph", "", _first_line(message))


def _first_line(message):
    for line in message.splitlines():
        if "error" in line.lower() or "fail" in line.lower():
            return line.strip()[:300]
    return message.strip().splitlines()[0][:300] if message.strip() else ""


def check_graph_is_importable(gm):
    """Reject what the importer or our static-shape runtime cannot take, before importing."""
    for node in gm.graph.nodes:
        if node.op not in ("placeholder", "output"):
            continue
        vals = [_val(node)] if node.op == "placeholder" else list(
            torch.utils._pytree.tree_leaves([_val(a) if isinstance(a, torch.fx.Node) else a
                                             for a in torch.utils._pytree.tree_leaves(node.args)]))
        for v in vals:
            what = f"graph {'input' if node.op == 'placeholder' else 'output'} '{node.name}'"
            if not isinstance(v, torch.Tensor):
                raise EmberUnsupportedError(what, _describe(v), "only tensors are supported here")
            if any(not isinstance(s, int) for s in v.shape):
                raise EmberUnsupportedError(what, str(tuple(v.shape)),
                                            "symbolic (dynamic) shapes are not supported yet")
            if v.dtype not in _SUPPORTED_DTYPES:
                raise EmberUnsupportedError(what, _describe(v), f"dtype {v.dtype} not supported")
            if v.device.type != "cpu":
                raise EmberUnsupportedError(what, _describe(v), f"device {v.device} for target cpu")
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(_val(node), torch.Tensor):
            if _val(node).dtype not in _SUPPORTED_DTYPES:
                raise EmberUnsupportedError(str(node.target), node_input_shapes(node),
                                            f"dtype {_val(node).dtype} not supported")


def import_to_linalg(gm):
    """Return an MLIR module (linalg-on-tensors) with function @forward."""
    check_graph_is_importable(gm)
    try:
        return torch_mlir_fx.stateless_fx_import(gm, output_type="linalg-on-tensors",
                                                 model_name=ENTRY)
    except Exception as exc:  # torch-mlir raises several types; all mean 'cannot lower'
        raise unsupported_from_message(gm, f"{type(exc).__name__}: {exc}") from None
