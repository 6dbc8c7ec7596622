"""Size arithmetic of a dynamic-shape graph moves out of the kernel into its call prologue.

Dynamo graphs compute scalars from the symbolic sizes: `mul = s0 * s1` for a reshape,
`sym_float(s3) ** -0.5` for attention's scale. torch-mlir imports few of these
(`sym_float` not at all), and they are cheap Python on ints. Each such node whose inputs
are graph inputs (or other such nodes) becomes a new graph input; the CompiledGraph
computes it per call by running the same FX targets on the actual ints:

    before: forward(a0: s0, a1: s1, x: (s0, s1, 8))
              mul = a0 * a1;  scale = sym_float(a1) ** -0.5
              v = view(x, [mul, 8]);  y = mul.Scalar(v, scale)
    after:  forward(a0, a1, x, p0: s0*s1, p1: float)   prologue: p0 = a0 * a1
              v = view(x, [p0, 8]);  y = mul.Scalar(v, p1)     p1 = sym_float(a1) ** -0.5

A size read from an intermediate tensor (`sym_size(conv_out, 2)`, whose value is
`(s1 - 1)//4 + 1` in a CNN with a dynamic image size) cannot run in the prologue, but its
expression can: it is evaluated from the input sizes that define its symbols.
"""
import operator

import torch
from torch.utils._sympy.printers import PythonPrinter

from ember.compiler.fx_meta import inputs_first, value_of as _val

_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)


def _is_scalar_node(node):
    return node.op == "call_function" and isinstance(_val(node), (torch.SymInt, torch.SymFloat,
                                                                   torch.SymBool))


class Prologue:
    """The lifted nodes in evaluation order, as (target, args with ('in', i) / ('p', j)
    references, kwargs); `run(args)` returns the extra arguments of one call."""

    def __init__(self, steps):
        self.steps = steps
        lines = ["def run(args):", "    p = []"]
        namespace = {}
        for j, (target, args, kwargs) in enumerate(steps):
            namespace[f"f{j}"] = target

            def ref(a):
                if isinstance(a, tuple) and len(a) == 2 and a[0] in ("in", "p"):
                    return f"args[{a[1]}]" if a[0] == "in" else f"p[{a[1]}]"
                namespace[f"c{len(namespace)}"] = a
                return f"c{len(namespace) - 1}"

            call = ", ".join([ref(a) for a in args] + [f"{k}={ref(v)}" for k, v in kwargs.items()])
            lines.append(f"    p.append(f{j}({call}))")
        lines.append("    return p")
        exec(compile("\n".join(lines), "<ember scalar prologue>", "exec"), namespace)
        self.run = namespace["run"]

    def __len__(self):
        return len(self.steps)


def symbol_reads(placeholders):
    """{symbol: (placeholder index, dim or None)}: where each plain symbol of the graph's
    inputs can be read (a size of an input tensor, or an int input)."""
    reads = {}
    for i, node in enumerate(placeholders):
        v = _val(node)
        sizes = [(None, v)] if isinstance(v, torch.SymInt) else (
            list(enumerate(v.shape)) if isinstance(v, torch.Tensor) else [])
        for k, size in sizes:
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                reads.setdefault(size.node.expr, (i, k))
    return reads


def is_computable_from_inputs(value, reads):
    """Whether the scalar `value` (SymInt/SymFloat/SymBool) is an expression of symbols
    the graph's inputs carry (not of unbacked ones from `.item()`)."""
    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return False
    return value.node.expr.free_symbols <= set(reads)


def expression_step(value, reads):
    """(function, [('in', i), ...], {}): computes `value` from the input sizes its
    expression uses."""
    symbols = sorted(value.node.expr.free_symbols, key=str)
    inputs = sorted({reads[s][0] for s in symbols})
    cast = {torch.SymInt: "int", torch.SymFloat: "float", torch.SymBool: "bool"}[type(value)]
    lines = [f"def size_expression({', '.join(f'a{i}' for i in inputs)}):"]
    for s in symbols:
        i, k = reads[s]
        lines.append(f"    {s} = a{i}" + ("" if k is None else f".shape[{k}]"))
    lines.append(f"    return {cast}({PythonPrinter().doprint(value.node.expr)})")
    namespace = {}
    exec(compile("\n".join(lines), "<ember size expression>", "exec"), namespace)
    return namespace["size_expression"], [("in", i) for i in inputs], {}


def lift_scalar_computations(gm):
    """Rewrite `gm` in place (see the module doc); return the Prologue (None: nothing to
    lift). Nodes reading computed tensors (`.item()`) stay."""
    graph = gm.graph
    placeholders = inputs_first(graph)  # the lifted scalars are appended after them
    index = {n: ("in", i) for i, n in enumerate(placeholders)}
    reads = symbol_reads(placeholders)
    lifted = []  # (node, target, args, kwargs)
    by_value = {}  # (type, sympy expression) -> the lifted node computing it
    duplicates = []  # (node, the lifted node with the same value)
    for node in graph.nodes:
        if not _is_scalar_node(node):
            continue
        # A CNN reads the same sizes in every layer (`sym_size(x, 2)`, `(s1 - 1)//2 + 1`):
        # one argument per distinct value, not one per node.
        key = (type(_val(node)), _val(node).node.expr)
        if key in by_value:
            duplicates.append((node, by_value[key]))
            index[node] = index[by_value[key]]
            continue
        ok = True

        def convert(a):
            nonlocal ok
            if isinstance(a, torch.fx.Node):
                if a not in index:
                    ok = False
                    return None
                return index[a]
            if isinstance(a, (list, tuple)):
                ok = False  # keep the prologue to scalar operations
            return a

        args = [convert(a) for a in node.args]
        kwargs = {k: convert(v) for k, v in node.kwargs.items()}
        target = node.target
        if not ok:
            if not is_computable_from_inputs(_val(node), reads):
                continue
            target, args, kwargs = expression_step(_val(node), reads)
        index[node] = ("p", len(lifted))
        by_value[key] = node
        lifted.append((node, target, args, kwargs))
    if not lifted:
        return None
    for node, same in duplicates:
        node.replace_all_uses_with(same)
    last = placeholders[-1] if placeholders else None
    for j, (node, *_rest) in enumerate(lifted):
        if last is None:
            with graph.inserting_before(next(iter(graph.nodes))):
                new = graph.placeholder(f"scalar_{j}")
        else:
            with graph.inserting_after(last):
                new = graph.placeholder(f"scalar_{j}")
        new.meta["val"] = _val(node)
        node.replace_all_uses_with(new)
        last = new
    gone = {n for n, _ in duplicates} | {n for n, *_ in lifted}
    for node in reversed(list(graph.nodes)):  # users before what they use
        if node in gone:
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return Prologue([(t, a, k) for _n, t, a, k in lifted])
