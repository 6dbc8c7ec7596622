"""What Dynamo's ShapeEnv knows about a graph's symbolic sizes, for the importer and the
runtime.

    graph inputs: arg0 = s77 (an int), arg1: (s77, 8), arg2: (s77 * 2,)
    symbols:      s77 from arg1.shape[0], range [2, 4096], divisor 1
    prepare():    s77 = a1.shape[0]; check a2.shape[0] == 2*s77 and 2 <= s77 <= 4096;
                  return the symbol values and the kernel outputs' shapes

`ShapeProgram` compiles those few lines to one Python function when the graph is built,
so a call costs a handful of attribute reads and comparisons, not an interpretation of
sympy expressions.
"""
import sympy
import torch
from torch.utils._sympy.functions import Mod, PythonMod
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter

from ember.errors import EmberUnsupportedError
from ember.compiler.fx_meta import value_of as _val

INT64_MAX = 2 ** 63 - 1


def _expr(size):
    """The sympy expression of a size (a SymInt or an int)."""
    return size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(int(size))


def is_symbolic_value(v):
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    return isinstance(v, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in v.shape)


def has_symbolic_shapes(gm):
    return any(is_symbolic_value(_val(n)) for n in gm.graph.nodes if n.op == "placeholder")


def shape_facts(gm):
    """What the ShapeEnv assumes about a graph's sizes (guards, ranges), as text: part of
    the compile-cache key, since Dynamo recompiles the same graph code under other facts
    (e.g. `s0 % 2 == 0` on one compile, not on the next)."""
    env = shape_env_of(gm) if has_symbolic_shapes(gm) else None
    if env is None:
        return ""
    guards = sorted(str(g.expr) for g in getattr(env, "guards", ()) or ())
    ranges = sorted(f"{s}:{r}" for s, r in env.var_to_range.items())
    return ";".join(guards) + "|" + ";".join(ranges)


def specialize_constant_sizes(gm):
    """Sizes Dynamo specialized to a constant can stay SymInts whose expression is the
    integer (a weight's 3x3 kernel under dynamic=True). torch-mlir types such a dim `?`
    while the ops after it compute static sizes, e.g. a collapse of the dynamic-typed
    (s0, 3, 3, 3) weight to a static (s0, 27): an invalid tensor.collapse_shape. Such
    sizes and strides become ints in the graph's values, in place:

        before: w: FakeTensor((s60, 3, 3, 3)), the 3s SymInts   -> !torch.vtensor<[?,?,?,?]>
        after:  w: FakeTensor((s60, 3, 3, 3)), the 3s ints      -> !torch.vtensor<[?,3,3,3]>
    """
    def constant(size):
        return isinstance(size, torch.SymInt) and size.node.expr.is_number

    def concrete(size):
        return int(size.node.expr) if constant(size) else size

    def specialized(v):
        if not isinstance(v, torch.Tensor) or not hasattr(v, "fake_mode") or not any(
                constant(s) for s in list(v.shape) + list(v.stride())):
            return v
        with v.fake_mode:
            return torch.empty_strided([concrete(s) for s in v.shape],
                                       [concrete(s) for s in v.stride()],
                                       dtype=v.dtype, device=v.device)

    for node in gm.graph.nodes:
        if "val" in node.meta:
            old = node.meta["val"]
            new = torch.utils._pytree.tree_map(specialized, old)
            if any(a is not b for a, b in zip(torch.utils._pytree.tree_leaves(old),
                                              torch.utils._pytree.tree_leaves(new))):
                node.meta["val"] = new
                node.meta.pop("tensor_meta", None)  # torch-mlir types from it first


def shape_env_of(gm):
    for node in gm.graph.nodes:
        for v in torch.utils._pytree.tree_leaves(_val(node)):
            if isinstance(v, torch.SymInt):
                return v.node.shape_env
            if isinstance(v, torch.Tensor):
                for s in v.shape:
                    if isinstance(s, torch.SymInt):
                        return s.node.shape_env
    return None


def _free_symbols_of(value):
    found = set()
    for v in torch.utils._pytree.tree_leaves(value):
        if isinstance(v, torch.SymInt):
            found |= v.node.expr.free_symbols
        elif isinstance(v, torch.Tensor):
            for s in v.shape:
                if isinstance(s, torch.SymInt):
                    found |= s.node.expr.free_symbols
    return found


def _free_symbols(gm):
    found = set()
    for node in gm.graph.nodes:
        found |= _free_symbols_of(_val(node))
    return found


class ShapeProgram:
    """The symbols of one graph: where each is read from, its facts, and the compiled
    per-call function that evaluates them, checks them, and gives the output shapes."""

    def __init__(self, gm, output_vals):
        self.shape_env = shape_env_of(gm)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.sources = {}  # symbol -> Python expression reading it from the arguments
        self._int_inputs = {}  # placeholder index -> its symbol
        for i, node in enumerate(placeholders):
            v = _val(node)
            if isinstance(v, torch.SymInt):
                self._int_inputs[i] = v.node.expr
                if isinstance(v.node.expr, sympy.Symbol):
                    self.sources.setdefault(v.node.expr, f"a{i}")
            elif isinstance(v, torch.Tensor):
                for k, s in enumerate(v.shape):
                    if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                        self.sources.setdefault(s.node.expr, f"a{i}.shape[{k}]")
        self._solve_offset_sources(placeholders)
        missing = _free_symbols(gm) - set(self.sources)
        if missing:
            names = ", ".join(sorted(map(str, missing)))
            where = next((n for n in gm.graph.nodes if _free_symbols_of(_val(n)) & missing), None)
            raise EmberUnsupportedError(
                "the graph" if where is None else f"node '{where.name}' ({where.target})",
                "" if where is None else str(_val(where)),
                f"sizes {names} are not sizes of its inputs (data-dependent sizes are "
                "computed by ATen)")
        # First-appearance order: the order of the size arguments of the compiled code.
        self.symbols = list(self.sources)
        self.ranges = {s: self._range(s) for s in self.symbols}
        self.divisors = {s: self._divisor(s) for s in self.symbols}
        self._prepare = self._compile(placeholders, output_vals)

    def _solve_offset_sources(self, placeholders):
        """A symbol seen only as `s + c` or `k * s` in the inputs (a KV cache of length
        past + 1) is solved from that size."""
        for i, node in enumerate(placeholders):
            v = _val(node)
            reads = ([(f"a{i}", v)] if isinstance(v, torch.SymInt) else
                     [(f"a{i}.shape[{k}]", d) for k, d in enumerate(v.shape)]
                     if isinstance(v, torch.Tensor) else [])
            for read, size in reads:
                if not isinstance(size, torch.SymInt):
                    continue
                expr = size.node.expr
                free = expr.free_symbols
                if len(free) != 1:
                    continue
                (symbol,) = free
                if symbol in self.sources:
                    continue
                offset, scale = expr - symbol, sympy.simplify(expr / symbol)
                if offset.is_Integer:
                    self.sources[symbol] = f"({read} - {int(offset)})"
                elif scale.is_Integer and int(scale) > 0:
                    self.sources[symbol] = f"({read} // {int(scale)})"

    def _range(self, symbol):
        vr = self.shape_env.var_to_range.get(symbol) if self.shape_env else None
        if vr is None:
            return 0, INT64_MAX
        lower = 0 if vr.lower in (-int_oo,) or vr.lower < 0 else int(vr.lower)
        upper = INT64_MAX if vr.upper == int_oo or vr.upper > INT64_MAX else int(vr.upper)
        return lower, upper

    def _divisor(self, symbol):
        """The largest k such that a guard Dynamo installs states s % k == 0 (the
        ShapeEnv's `divisible` set also holds facts derived for simplification only)."""
        best = 1
        for guard in getattr(self.shape_env, "guards", ()) or ():
            expr = getattr(guard, "expr", None)
            if not isinstance(expr, sympy.Eq) or expr.args[1] != 0:
                continue
            mod = expr.args[0]
            if isinstance(mod, (sympy.Mod, Mod, PythonMod)) and mod.args[0] == symbol \
                    and mod.args[1].is_Integer:
                best = max(best, int(mod.args[1]))
        return best

    def int_arguments(self):
        """{placeholder index: sympy expression} for the inputs that are sizes (ints)."""
        return dict(self._int_inputs)

    def symbol_names(self):
        return [str(s) for s in self.symbols]

    def _compile(self, placeholders, output_vals):
        printer = PythonPrinter()
        lines = [f"def prepare({', '.join(f'a{i}' for i in range(len(placeholders)))}):"]
        for s in self.symbols:
            lines.append(f"    {s} = {self.sources[s]}")
        checks = []
        for i, node in enumerate(placeholders):
            v = _val(node)
            if isinstance(v, torch.Tensor):
                for k, size in enumerate(v.shape):
                    read = f"a{i}.shape[{k}]"
                    # Static sizes are Dynamo's guards; a symbolic one that is not read
                    # is assumed by the kernel (it reads only the size arguments).
                    if isinstance(size, torch.SymInt) and read not in self.sources.values():
                        checks.append(f"{read} != {printer.doprint(_expr(size))}")
        for s in self.symbols:
            lo, hi = self.ranges[s]
            checks.append(f"not {lo} <= {s} <= {hi}")
            if self.divisors[s] > 1:
                checks.append(f"{s} % {self.divisors[s]}")
        if checks:
            lines.append(f"    if {' or '.join(checks)}:")
            lines.append(f"        fail(({', '.join(str(s) for s in self.symbols)},))")
        shapes = ["(" + "".join(f"{printer.doprint(_expr(d))}, " for d in v.shape) + ")"
                  for v in output_vals]
        lines.append(f"    return ({''.join(f'{s}, ' for s in self.symbols)}), "
                     f"({''.join(s + ', ' for s in shapes)})")
        namespace = {"fail": self._fail}
        exec(compile("\n".join(lines), "<ember shape program>", "exec"), namespace)
        self.source = "\n".join(lines)
        return namespace["prepare"]

    def _fail(self, values):
        facts = ", ".join(f"{s} in [{lo}, {hi}]" + (f" and a multiple of {self.divisors[s]}"
                                                  if self.divisors[s] > 1 else "")
                          for s, (lo, hi) in self.ranges.items())
        got = ", ".join(f"{s}={v}" for s, v in zip(self.symbols, values))
        raise RuntimeError(f"ember: the inputs' sizes break the compiled graph's shape "
                           f"assumptions ({facts}; sizes of equal symbols must match); got "
                           f"{got}")

    def prepare(self, *args):
        """(symbol values, output shapes) for one call."""
        return self._prepare(*args)

    def guards_for_import(self):
        """{name: (min, max)} for torch-mlir's symbolic import, in size-argument order."""
        return {str(s): self.ranges[s] for s in self.symbols}

    def divisors_attr(self):
        return {str(s): d for s, d in self.divisors.items() if d > 1}
