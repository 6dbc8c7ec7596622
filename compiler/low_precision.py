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


_GEMMS = (aten.mm.default, aten.bmm.default, aten.addmm.default)
_CASTS = (aten._to_copy.default, torch.ops.prims.convert_element_type.default)


def _low_source(node):
    """The f16 / bf16 value `node` is a widening of (through casts), or None."""
    while isinstance(node, torch.fx.Node):
        # what the user's program had: upcast() widened the value itself
        if _is_low(_val(node)) or _is_low(node.meta.get(USER_VAL)):
            return node
        if node.op != "call_function" or node.target not in _CASTS or not node.args:
            return None
        node = node.args[0]
    return None


def _gemm_dtype(node):
    """The low dtype a GEMM runs in: the user's program's own (a bf16 mm), or that of
    operands that are all widened from one low dtype (a decomposed bf16 linear)."""
    user = node.meta.get(USER_VAL)
    if _is_low(user):
        return user.dtype
    tensors = [a for a in node.args if isinstance(a, torch.fx.Node)]
    sources = [_low_source(a) for a in tensors]
    if not tensors or None in sources:
        return None
    dtypes = {(_val(s) if _is_low(_val(s)) else s.meta[USER_VAL]).dtype for s in sources}
    return dtypes.pop() if len(dtypes) == 1 else None


def gemms_in_low_precision(gm):
    """GPU targets: a GEMM the user's program runs in float16/bfloat16 runs in that dtype
    through the vendor BLAS (tensor cores), as eager does; the rest stays in f32. Its
    operands are rounded to the low dtype by the ember kernels that produce them, its
    result widened by the kernels that read it. Call after upcast(). Returns gm.

        after upcast:  %c = mm(%a32, %b32)                                  (f32 GEMM)
        after this:    %a16 = _to_copy(%a32, bf16) ; %b16 = _to_copy(%b32, bf16)
                       %c16 = mm(%a16, %b16)  [ATen: cuBLAS in bf16, f32 accumulation]
                       %c = _to_copy(%c16, f32)
    """
    graph = gm.graph
    fake_inputs = [_val(n) for n in graph.nodes if n.op == "placeholder"]
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _GEMMS:
            continue
        low = _gemm_dtype(node)
        if low is None:
            continue
        with graph.inserting_before(node):
            args = []
            for a in node.args:
                if isinstance(a, torch.fx.Node):
                    source = _low_source(a)
                    if source is not None and getattr(_val(source), "dtype", None) == low:
                        a = source  # widened only for this GEMM: use the low value itself
                    else:
                        a = graph.call_function(aten._to_copy.default, (a,), {"dtype": low})
                args.append(a)
        node.args = tuple(args)
        node.meta[EXTERN_TAG] = ("a float16/bfloat16 GEMM runs in its dtype through the "
                                 "vendor BLAS")
        with graph.inserting_after(node):
            wide = graph.call_function(aten._to_copy.default, (node,),
                                       {"dtype": torch.float32})
        node.replace_all_uses_with(wide, delete_user_cb=lambda u: u is not wide)
        changed = True
    if changed:
        refresh_meta(gm, fake_inputs)
    return gm
