"""Importing a dynamic-shape FX graph through torch-mlir's symbolic-shape import.

torch-mlir emits `torch.symbolic_int` per symbol (with the ShapeEnv's range) and a
`torch.bind_symbolic_shape` per value. ember needs the binds of the graph's inputs and
outputs only (the rest follows from the lowering, see ember-shape-resolve-dims), and its
own translation of the size expressions: torch-mlir's lacks FloorDiv / CeilDiv, which
attention's head size (hidden // heads) brings in.
"""
import sympy
import torch
from torch.utils._sympy.functions import CeilDiv, FloorDiv, Mod, PythonMod
from torch_mlir import ir
from torch_mlir.extras.fx_importer import (GraphNodeImporter, Operation, RangeConstraint,
                                          TorchFakeTensor)

from ember.dialects.shape import DIVISORS_ATTR, SHAPE_ATTR, set_arg_attr


class NotAffine(ValueError):
    pass


def to_affine(expr, symbols):
    """sympy size expression -> ir.AffineExpr over `symbols` ({name: AffineSymbolExpr})."""
    if isinstance(expr, sympy.Symbol):
        return symbols[str(expr)]
    if isinstance(expr, (int, sympy.Integer)):
        return ir.AffineConstantExpr.get(int(expr))
    args = [to_affine(a, symbols) for a in expr.args] if expr.args else []
    if isinstance(expr, sympy.Add):
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if isinstance(expr, sympy.Mul):
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if isinstance(expr, sympy.Pow) and isinstance(expr.args[1], sympy.Integer) \
            and int(expr.args[1]) > 0:
        out = args[0]
        for _ in range(int(expr.args[1]) - 1):
            out = out * args[0]
        return out
    if isinstance(expr, FloorDiv):
        return ir.AffineFloorDivExpr.get(*args)
    if isinstance(expr, CeilDiv):
        return ir.AffineCeilDivExpr.get(*args)
    if isinstance(expr, (Mod, PythonMod, sympy.Mod)):
        return ir.AffineModExpr.get(*args)
    raise NotAffine(f"size expression {expr} ({type(expr).__name__}) is not affine")


class BoundaryBindingImporter(GraphNodeImporter):
    """Binds the shapes of placeholders and of returned values only."""

    __slots__ = []

    def _create_bind_symbolic_shape_ops(self, loc, node):
        val = node.meta.get("val")
        if not isinstance(val, TorchFakeTensor) or not val._has_symbolic_sizes_strides:
            return
        if node.op != "placeholder" and not any(u.op == "output" for u in node.users):
            return
        exprs = [s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(s)
                 for s in val.size()]
        free = sorted(set().union(*[e.free_symbols for e in exprs]), key=lambda s: s.name)
        local = {str(s): ir.AffineSymbolExpr.get(i) for i, s in enumerate(free)}
        shape = ir.AffineMap.get(0, len(free), [to_affine(e, local) for e in exprs])
        Operation.create(name="torch.bind_symbolic_shape",
                         attributes={"shape_expressions": ir.AffineMapAttr.get(shape)},
                         operands=[self.resolve_node_value(node)] +
                                  [self.resolve_symbol_value(str(s)) for s in free],
                         loc=loc)


def import_symbolic_graph(importer, gm, func_name, shapes):
    """import_stateless_graph with the symbols of `shapes` (a ShapeProgram), in the order
    of the compiled code's size arguments; sizes passed as ints are tied to theirs."""
    importer._cc._symbolic_guards = {name: RangeConstraint(lo, hi) for name, (lo, hi)
                                     in shapes.guards_for_import().items()}
    func_op = importer.import_stateless_graph(gm.graph, func_name=func_name,
                                              import_symbolic_shape_expressions=True)
    with importer.module.context:
        names = {name: ir.AffineSymbolExpr.get(k) for k, name in enumerate(shapes.symbol_names())}
        # A size passed as an int is that expression of the symbols: the ember_shape
        # passes then know that arange(n) has the length of the dim that n is.
        for i, size in shapes.int_arguments().items():
            try:
                expr = to_affine(size, names)
            except (NotAffine, KeyError):
                continue  # e.g. Max(s0, s1): the int stays an opaque argument
            set_arg_attr(func_op.operation, i, SHAPE_ATTR, ir.AffineMapAttr.get(
                ir.AffineMap.get(0, len(names), [expr])))
        divisors = shapes.divisors_attr()
        if divisors:
            i64 = ir.IntegerType.get_signless(64)
            func_op.attributes[DIVISORS_ATTR] = ir.DictAttr.get(
                {k: ir.IntegerAttr.get(i64, v) for k, v in divisors.items()})
    return func_op
