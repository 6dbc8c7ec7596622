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
import operator

import sympy
import torch
from torch._prims_common import is_contiguous_or_false, make_contiguous_strides_for
from torch.utils._sympy.functions import FloorDiv

from ember.errors import EmberUnsupportedError
from ember.compiler.fx_meta import inputs_first, value_of as _val
from ember.compiler.symbolic import _expr

aten = torch.ops.aten
prims = torch.ops.prims
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}


def _groups(in_sizes, out_sizes, hint, equal):
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
        if not equal(pi, pj):
            return None
        groups.append((gi, gj))
    return groups


class _SizeNodes:
    """FX nodes computing size expressions from the graph's inputs (the scalar prologue
    then computes them per call): a -1 of a view has to become its value."""

    _OPS = {sympy.Add: operator.add, sympy.Mul: operator.mul, FloorDiv: operator.floordiv}

    def __init__(self, graph):
        self.graph, self.sources = graph, {}
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        for node in placeholders:
            v = _val(node)
            if isinstance(v, torch.SymInt) and isinstance(v.node.expr, sympy.Symbol):
                self.sources.setdefault(v.node.expr, (node, None))
            elif isinstance(v, torch.Tensor):
                for k, size in enumerate(v.shape):
                    if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                        self.sources.setdefault(size.node.expr, (node, k))

    def build(self, expr):
        """An int or a node for `expr` (inserted at the graph's current insertion point)."""
        if isinstance(expr, sympy.Integer):
            return int(expr)
        if isinstance(expr, sympy.Symbol):
            if expr not in self.sources:
                raise KeyError(expr)
            node, k = self.sources[expr]
            if k is None:
                return node
            out = self.graph.call_function(aten.sym_size.int, (node, k))
            out.meta["val"] = _val(node).shape[k]
            return out
        if isinstance(expr, sympy.Pow) and isinstance(expr.args[1], sympy.Integer) \
                and int(expr.args[1]) > 0:
            expr = sympy.Mul(*[expr.args[0]] * int(expr.args[1]), evaluate=False)
        op = self._OPS.get(type(expr))
        if op is None:
            raise KeyError(expr)
        args = [self.build(a) for a in expr.args]
        value = args[0]
        for a in args[1:]:
            value = self._binary(op, value, a)
        return value

    def _binary(self, op, a, b):
        out = self.graph.call_function(op, (a, b))
        out.meta["val"] = op(_val(a) if isinstance(a, torch.fx.Node) else a,
                             _val(b) if isinstance(b, torch.fx.Node) else b)
        return out


def _unsupported(node):
    """A symbolic reshape ember cannot write exactly runs through ATen (torch-mlir's own
    lowering would guess)."""
    from .importer import node_input_shapes, user_op_name

    return EmberUnsupportedError(user_op_name(node), node_input_shapes(node),
                                 "reshape with symbolic sizes that do not group exactly")


def _prover(fake):
    """Whether two size expressions are equal for all sizes the guards allow."""
    env = next((s.node.shape_env for s in fake.shape if isinstance(s, torch.SymInt)), None)

    def equal(a, b):
        if sympy.simplify(a - b) == 0:
            return True
        return env is not None and env._maybe_evaluate_static(sympy.Eq(a, b)) == sympy.true

    return equal


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


def _dense_as_strided_to_view(graph):
    """as_strided(x, size, contiguous strides of size, 0) of a contiguous x holding as many
    elements, with symbolic sizes, is a reshape; written as one, it is split like the
    others below (AOTAutograd replays a channels-last tangent's views this way under
    dynamic shapes: as_strided(buffer of (s0-1)*16+16, [s0, 16, 1, 1], [16, 1, 1, 1])).

        before: y = as_strided(x, [s0, 16], [16, 1], 0)      x: (16*s0,) contiguous
        after:  y = view(x, [s0, 16])
    """
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.as_strided.default:
            continue
        src, out = _val(node.args[0]), _val(node)
        offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
        if not isinstance(src, torch.Tensor) or not isinstance(out, torch.Tensor) or \
                all(isinstance(v, int) for v in out.shape) or offset not in (None, 0):
            continue
        equal = _prover(out)
        if not is_contiguous_or_false(src) or not equal(_expr(src.storage_offset()), 0) or \
                not equal(_expr(src.numel()), _expr(out.numel())):
            continue
        expected = make_contiguous_strides_for(out.shape)
        if not all(equal(_expr(size), 1) or equal(_expr(st), _expr(want))
                   for size, st, want in zip(out.shape, out.stride(), expected)):
            continue
        with graph.inserting_before(node):
            view = _call(graph, aten.view.default, (node.args[0], node.args[1]))
        node.replace_all_uses_with(view)
        graph.erase_node(node)


def split_symbolic_views(gm):
    """Rewrite reshapes whose sizes are symbolic (see the module doc), in place."""
    graph = gm.graph
    changed = False
    inputs_first(graph)  # a view's -1 may be computed from an input declared below it
    _dense_as_strided_to_view(graph)
    sizes = _SizeNodes(graph)
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _RESHAPES:
            continue
        src, out = _val(node.args[0]), _val(node)
        if not isinstance(src, torch.Tensor) or not isinstance(out, torch.Tensor):
            continue
        if all(isinstance(s, int) for s in list(src.shape) + list(out.shape)):
            continue
        # Static size-1 dims are squeezed out first and unsqueezed back last: the
        # grouping then never has to place them ((s0, s1, 1, 1) -> (s0, s1)).
        in_ones = [k for k, s in enumerate(src.shape) if isinstance(s, int) and s == 1]
        out_ones = [k for k, s in enumerate(out.shape) if isinstance(s, int) and s == 1]
        in_sizes = [_expr(s) for k, s in enumerate(src.shape) if k not in in_ones]
        out_sizes = [_expr(s) for k, s in enumerate(out.shape) if k not in out_ones]
        groups = _groups(in_sizes, out_sizes, _hinter(src), _prover(src))
        if groups is None:
            raise _unsupported(node)
        with graph.inserting_before(node):
            # ints and SymInt nodes; torch-mlir's unflatten cannot infer a -1
            try:
                size_args = [sizes.build(_expr(v)) if isinstance(a, int) and a == -1 else a
                             for k, (a, v) in enumerate(zip(node.args[1], out.shape))
                             if k not in out_ones]
            except KeyError:
                raise _unsupported(node) from None
            value = node.args[0]
            for k in reversed(in_ones):  # (torch-mlir lowers squeeze.dim, not .dims)
                value = _call(graph, aten.squeeze.dim, (value, k))
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
            for k in out_ones:
                value = _call(graph, aten.unsqueeze.default, (value, k))
            node.replace_all_uses_with(value)
        graph.erase_node(node)
        changed = True
    if changed:
        graph.lint()
        gm.recompile()
    return changed
