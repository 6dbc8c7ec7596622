"""float16 / bfloat16 graphs computed in float32, as inductor does on CPUs without native
half arithmetic.

    before: %x: f16;  %y = mul(%x, 2);  %s = sum(%y, 1);  return (%s,)        all f16
    after:  %x: f16;  %x32 = _to_copy(%x, f32)  [ATen]
            %y = mul(%x32, 2);  %s = sum(%y, 1)          (f32: one ember kernel)
            %s16 = _to_copy(%s, f16) [ATen];  return (%s16,)

Eager rounds each op's result to the low dtype; computing in f32 and rounding at the
graph's outputs is at least as accurate (eager's own reductions accumulate in f32), so
results agree within the dtype's tolerance. The casts at the borders run through ATen
(tagged for compiler/extern_ops.py), which keeps every ember kernel in f32. Views of
inputs that the graph returns stay views (aliasing as in eager).
"""
import torch

from .fx_meta import refresh_meta, value_of as _val
from .graph_outputs import VIEW_OPS

aten = torch.ops.aten
LOW_PRECISION = (torch.float16, torch.bfloat16)
EXTERN_TAG = "ember_extern"  # node.meta key: the reason this node runs through ATen
USER_VAL = "ember_user_val"  # node.meta key: the value as eager computes it (for messages)


def _is_low(value):
    return isinstance(value, torch.Tensor) and value.dtype in LOW_PRECISION


def has_low_precision(gm):
    return any(_is_low(v) for n in gm.graph.nodes
               for v in torch.utils._pytree.tree_leaves(_val(n)))


def _to_f32(value):
    return torch.float32 if value in LOW_PRECISION else value


def upcast(gm):
    """Rewrite `gm` in place to compute in float32 (see the module docstring). Returns gm."""
    graph = gm.graph
    fake_inputs = []
    as_f32 = {}  # original low-precision node -> its f32 replacement
    kept_low = set()  # placeholders and views of them, left untouched
    reason = "the graph's float16/bfloat16 borders are cast by ATen; ember computes in f32"
    output = next(n for n in graph.nodes if n.op == "output")
    for node in graph.nodes:  # error messages name the dtypes the user's program has
        node.meta[USER_VAL] = _val(node)
    for node in list(graph.nodes):
        if node.op in ("placeholder", "get_attr"):
            if node.op == "placeholder":
                fake_inputs.append(_val(node))
            if _is_low(_val(node)) or (node.op == "get_attr" and _is_low(_attr(gm, node))):
                kept_low.add(node)
            continue
        if node.op != "call_function":
            continue
        if node.target in VIEW_OPS and node.args and node.args[0] in kept_low:
            kept_low.add(node)
            node.meta[EXTERN_TAG] = reason
            continue
        for arg in node.all_input_nodes:
            if arg in kept_low and arg not in as_f32:
                with graph.inserting_after(arg):
                    cast = graph.call_function(aten._to_copy.default, (arg,),
                                               {"dtype": torch.float32})
                cast.meta[EXTERN_TAG] = reason
                cast.meta[USER_VAL] = _val(arg)
                as_f32[arg] = cast
        node.args = torch.fx.node.map_arg(node.args, lambda a: as_f32.get(a, a))
        node.kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: as_f32.get(a, a))
        node.args = tuple(_to_f32(a) if isinstance(a, torch.dtype) else a for a in node.args)
        node.kwargs = {k: _to_f32(v) if isinstance(v, torch.dtype) else v
                       for k, v in node.kwargs.items()}
    originals = {}
    for leaf in torch.utils._pytree.tree_leaves(output.args[0]):
        if isinstance(leaf, torch.fx.Node) and _is_low(_val(leaf)) and leaf not in kept_low:
            originals[leaf] = _val(leaf).dtype

    def cast_back(leaf):
        if leaf not in originals:
            return leaf
        with graph.inserting_before(output):
            back = graph.call_function(aten._to_copy.default, (leaf,),
                                       {"dtype": originals[leaf]})
        back.meta[EXTERN_TAG] = reason
        return back

    output.args = torch.fx.node.map_arg(output.args, cast_back)
    refresh_meta(gm, fake_inputs)
    return gm


def _attr(gm, node):
    value = gm
    for part in node.target.split("."):
        value = getattr(value, part)
    return value
