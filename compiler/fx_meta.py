"""Keep an FX graph's tensor metadata true after ember rewrote it (the importer reads it)."""
import torch
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
from torch.fx.passes.shape_prop import _extract_tensor_metadata


def value_of(node):
    """The node's fake value (AOTAutograd's `val`, Dynamo's `example_value`)."""
    return node.meta.get("val", node.meta.get("example_value"))


def inputs_first(graph):
    """Move every placeholder above the first computation (their order kept) and return
    them. A partition of a split graph declares each input where it first uses it; an
    input appended later (a lifted size, a symbol) must follow all of them in argument
    order yet precede every use."""
    inputs = [n for n in graph.nodes if n.op == "placeholder"]
    first_computation = next((n for n in graph.nodes if n.op != "placeholder"), None)
    if first_computation is not None:
        for node in inputs:
            first_computation.prepend(node)
    return inputs


def placeholder_values(gm):
    return [value_of(n) for n in gm.graph.nodes if n.op == "placeholder"]


def refresh_meta(gm, fake_inputs=None):
    """Recompile `gm` and recompute every node's `val` and `tensor_meta` from its inputs'
    fake values (by default the placeholders' own)."""
    gm.recompile()
    fake_inputs = placeholder_values(gm) if fake_inputs is None else fake_inputs
    mode = torch._guards.detect_fake_mode(fake_inputs)
    if mode is None:
        mode = torch._subclasses.FakeTensorMode(allow_non_fake_inputs=True)
    allowed, mode.allow_non_fake_inputs = mode.allow_non_fake_inputs, True  # constants
    try:
        with mode:
            FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fake_inputs)
    finally:
        mode.allow_non_fake_inputs = allowed
    for node in gm.graph.nodes:  # the importer reads tensor_meta before val: keep them equal
        value = value_of(node)
        if isinstance(value, torch.Tensor):
            node.meta["tensor_meta"] = _extract_tensor_metadata(value)
        else:
            node.meta.pop("tensor_meta", None)
    return gm
