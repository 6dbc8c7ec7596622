"""Float -> int8 / uint8 / int16 casts go through int32, as eager's do.

ATen converts a float to an int32 and keeps the low bits: 150.3 -> int8 -106, -3.7 ->
uint8 253. LLVM's direct fptosi / fptoui to i8 is poison out of range: ember gave 127 in
one loop nest and the wrapped value in another, and `x.to(torch.int8) * 3` crashed the
codegen worker.

    before: %y = prims.convert_element_type(%x : f32, torch.int8)
    after:  %w = prims.convert_element_type(%x : f32, torch.int32)
            %y = prims.convert_element_type(%w, torch.int8)
"""
import torch

from .fx_meta import refresh_meta, value_of

aten = torch.ops.aten
_CONVERT = torch.ops.prims.convert_element_type.default
_NARROW = (torch.int8, torch.uint8, torch.int16)


def _target_dtype(node):
    if node.target is _CONVERT:
        return node.args[1]
    if node.target is aten._to_copy.default:
        return node.kwargs.get("dtype")
    return None


def route_through_int32(gm):
    """Rewrite `gm` in place (see the module docstring); True if anything changed."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or _target_dtype(node) not in _NARROW:
            continue
        source = node.args[0]
        value = value_of(source) if isinstance(source, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point:
            continue
        with gm.graph.inserting_before(node):
            wide = gm.graph.call_function(_CONVERT, (source, torch.int32))
        node.replace_input_with(source, wide)
        changed = True
    if changed:
        refresh_meta(gm)
    return changed
