"""Reshapes with symbolic sizes become explicit flatten / unflatten steps.

torch-mlir lowers `aten.view` by matching input and output dims; with several dynamic
dims it guesses, and guesses wrong: view(x: (s0, s1, 32), [s0*s1, 32]) became a cast of x
to (?, 1, 32) and a collapse, which reads s1 times too little. The ShapeEnv knows the
sizes as expressions, so the grouping of dims is computed here exactly (products of the
sizes, compared symbolically) and the view is written as the prims torch-mlir lowers
without guessing (prims.collapse -> collapse_shape, unflatten -> expand_shape/reshape):

    before: v = view(x, [s0*s1, 32])          x: (s0, s1, 32)
            w = view(y, [s0, s1, 128])        y: (s0*s1, 128)
    after:  v = prims.collapse(x, 0, 1)
            w = unflatten.int(y, 0, [s0, s1])
"""
import sympy
import torch

aten = torch.ops.aten
prims = torch.ops.prims
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}


def _val(node):
    return node.meta.get("val", node.meta.get("example_value"))


def _expr(size):
    return size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(int(size))


def _groups(in_sizes, out_sizes, hint):
    """[(in dims, out dims)] with equal products, or None if no exact grouping is found.
    Which side grows next is decided on the example sizes (`hint`); each group's products
    must then be equal symbolically."""
    groups, i, j = [], 0, 0
    while i < len(in_sizes) or j < len(out_sizes):
        gi, gj = [], []
        pi = pj = sympy.Integer(1)
        while not (gi and gj and hint(pi) == hint(pj)):
            if i < len(in_sizes) and (not gi or j >= len(out_sizes) or hint(pi) < hint(pj)):
                pi *= in_sizes[i]
                gi.append(i)
                i += 1
            elif j < len(out_sizes):
                pj *= out_sizes[j]
                gj.append(j)
                j += 1
            else:
                return None
        if sympy.simplify(pi - pj) != 0:
            return None
        groups.append((gi, gj))
    # Trailing size-1 dims were absorbed by the last group's hint equality.
    return groups


def _size_args(node, sizes):
    """The view's size arguments (ints or SymInt nodes), with -1 resolved to the value."""
    args = list(node.args[1])
    return [s if not (isinstance(s, int) and s == -1) else v for s, v in zip(args, sizes)]


def _hinter(fake):
    """Evaluates a size expression at the example sizes of the graph's shape env."""
    env = next((s.node.shape_env for s in fake.shape if isinstance(s, torch.SymInt)), None)
    values = env.backed_var_to_val if env is not None else {}
    return lambda e: int(sympy.sympify(e).xreplace(values))


def _call(graph, target, args):
    """A new node with its fake value (computed under the graph's fake mode)."""
    node = graph.call_function(target, args)
    vals = torch.fx.node.map_arg(args, _val)
    src = vals[0]
    with src.fake_mode:
        node.meta["val"] = target(*vals)
    return node


def split_symbolic_views(gm):
    """Rewrite reshapes whose sizes are symbolic (see the module doc), in place."""
    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _RESHAPES:
            continue
        src, out = _val(node.args[0]), _val(node)
        if not isinstance(src, torch.Tensor) or not isinstance(out, torch.Tensor):
            continue
        if all(isinstance(s, int) for s in list(src.shape) + list(out.shape)):
            continue
        in_sizes = [_expr(s) for s in src.shape]
        out_sizes = [_expr(s) for s in out.shape]
        groups = _groups(in_sizes, out_sizes, _hinter(src))
        if groups is None:
            continue
        size_args = _size_args(node, list(out.shape))
        with graph.inserting_before(node):
            value = node.args[0]
            # Collapse multi-dim input groups, last first so earlier indices stay valid.
            for gi, _ in reversed(groups):
                if len(gi) > 1:
                    value = _call(graph, prims.collapse.default, (value, gi[0], gi[-1]))
            # One dim per group now: split the multi-dim output groups, last first
            # (torch-mlir's prims.split_dim lowering builds invalid IR for dynamic dims).
            for k in reversed(range(len(groups))):
                gj = groups[k][1]
                if len(gj) > 1:
                    value = _call(graph, aten.unflatten.int, (value, k, [size_args[j] for j in gj]))
            node.replace_all_uses_with(value)
        graph.erase_node(node)
        changed = True
    if changed:
        graph.lint()
        gm.recompile()
    return changed
