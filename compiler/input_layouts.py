"""Graph inputs in a permuted dense layout are read in place, not copied.

The compiled code takes one bare pointer per tensor and reads it as contiguous, so a
non-contiguous input used to be copied with `.contiguous()` on every call. In training
that is the common case: the backward graph receives saved activations that are
transposed views (attention's K^T, a linear's input^T), 16 copies per BERT step, alive
while the backward runs. When an input's strides are a permutation of contiguous strides
(dense, no gaps, no overlap), the graph instead takes its memory as the contiguous
tensor in physical order and permutes it back, a view that fuses into the consumers:

    before: forward(x: (64, 128) strides (1, 64))      the runtime copies x
    after:  forward(x_phys: (128, 64) contiguous)      x = permute(x_phys, [1, 0])
            the runtime passes x's pointer when its strides are (1, 64), else a copy
            laid out that way

Static shapes only: symbolic strides keep the copy.
"""
import torch

from .importer import _val

aten = torch.ops.aten


def dense_permutation(t):
    """The dim order (outermost first) in which `t` is contiguous, or None when it is
    already contiguous, not dense, or has symbolic sizes or strides."""
    if not isinstance(t, torch.Tensor) or t.dim() < 2 or t.is_contiguous():
        return None
    sizes, strides = list(t.shape), list(t.stride())
    if not all(isinstance(v, int) for v in sizes + strides) or 0 in sizes:
        return None
    order = sorted(range(t.dim()), key=lambda d: (-strides[d], d))
    expected = 1
    for d in reversed(order):
        if sizes[d] != 1 and strides[d] != expected:
            return None
        expected *= sizes[d]
    return order


def read_permuted_inputs_in_place(gm):
    """Rewrite `gm`'s dense permuted tensor inputs (see the module doc); return, per
    placeholder, the strides the runtime must hand over (None: contiguous)."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    layouts, rewritten = [], []
    for node in placeholders:
        v = _val(node)
        order = dense_permutation(v)
        if order is None:
            layouts.append(None)
            continue
        layouts.append(tuple(v.stride()))
        with graph.inserting_before(node):
            physical = graph.placeholder(node.name + "_physical")
        physical.meta["val"] = v.permute(order)  # contiguous, same storage
        rewritten.append((node, physical, [order.index(d) for d in range(len(order))]))
    if rewritten:
        for node, physical, inverse in rewritten:
            with graph.inserting_after(physical):
                logical = graph.call_function(aten.permute.default, (physical, inverse))
            logical.meta["val"] = _val(node)
            node.replace_all_uses_with(logical)
            graph.erase_node(node)
        graph.lint()
        gm.recompile()
    return layouts
