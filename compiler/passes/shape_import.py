"""ember-shape-import: torch-mlir's symbolic-shape ops -> the ember_shape dialect (torch IR,
before the lowering to linalg, which cannot take them).

    before: %0 = torch.symbolic_int "s77" {min_val = 2, max_val = 4096} : !torch.int
            torch.bind_symbolic_shape %arg1, [%0], affine_map<()[s0] -> (s0, 8)> : ...
            %2 = torch.aten.mm %arg1, %arg2 ...
            torch.bind_symbolic_shape %2, [%0], affine_map<()[s0] -> (s0, 16)> : ...
            return %2
    after:  func.func @forward(%arg1: ... {ember_shape.shape = affine_map<()[s0] -> (s0, 8)>},
                ...) attributes {ember_shape.symbols = ["s77"],
                                 ember_shape.result_shapes = [affine_map<()[s0] -> (s0, 16)>]}
            %0 = "ember_shape.symbol"() {name = "s77", min = 2, max = 4096, divisor = 1} : () -> index
            %2 = torch.aten.mm %arg1, %arg2 ...

Every map is over ALL symbols of the function, in `ember_shape.symbols` order, so the
later passes need no renaming. Divisibility facts (which torch.symbolic_int lacks) come
from an optional function attribute `ember_shape.divisors = {s77 = 8 : i64}` written by
the FX importer. The binds of intermediate values are dropped: after lowering, their
dims are computed from the arguments' dims, which ember-shape-resolve-dims ties to the
symbols.
"""
from torch_mlir import ir

from ember.compiler.ir_walk import collect, entry_functions
from ember.dialects.shape import SYMBOL_OP_NAME
# (defined with the dialect, so the importer reads them without loading every pass)
from ember.dialects.shape import (DIVISORS_ATTR, RESULT_SHAPES_ATTR, SHAPE_ATTR,  # noqa: F401
                                  SYMBOLS_ATTR, arg_attr, set_arg_attr)

PASS_NAME = "ember-shape-import"


def _int_attr(op, name):
    return ir.IntegerAttr(op.attributes[name]).value


_BINARY = [(ir.AffineAddExpr, ir.AffineExpr.__add__), (ir.AffineMulExpr, ir.AffineExpr.__mul__),
           (ir.AffineModExpr, ir.AffineExpr.__mod__),
           (ir.AffineFloorDivExpr, ir.AffineFloorDivExpr.get),
           (ir.AffineCeilDivExpr, ir.AffineCeilDivExpr.get)]


def rename_symbols(expr, positions):
    """`expr` with symbol i replaced by symbol positions[i] (all at once)."""
    expr = expr.maybe_downcast()
    if isinstance(expr, ir.AffineSymbolExpr):
        return ir.AffineSymbolExpr.get(positions[expr.position])
    for kind, build in _BINARY:
        if isinstance(expr, kind):
            return build(rename_symbols(expr.lhs, positions), rename_symbols(expr.rhs, positions))
    return expr


def _global_map(bind, positions, n_symbols):
    """The bind's map re-expressed over all `n_symbols` symbols of the function."""
    local = ir.AffineMapAttr(bind.attributes["shape_expressions"]).value
    table = [positions[v] for v in list(bind.operands)[1:]]
    return ir.AffineMap.get(0, n_symbols, [rename_symbols(e, table) for e in local.results])


def _unbound_map(n_symbols):
    """Marks a result without a bind (a static shape): no results."""
    return ir.AffineMap.get(0, n_symbols, [])


def shape_import(module_op, pass_=None):
    for func_op in entry_functions(module_op):
        symbols = collect(func_op, lambda o: o.name == "torch.symbolic_int")
        binds = collect(func_op, lambda o: o.name == "torch.bind_symbolic_shape")
        if not symbols:
            continue
        divisors = {}
        if DIVISORS_ATTR in func_op.attributes:
            divisors = {a.name: ir.IntegerAttr(a.attr).value
                        for a in ir.DictAttr(func_op.attributes[DIVISORS_ATTR])}
            del func_op.attributes[DIVISORS_ATTR]
        positions = {s.results[0]: i for i, s in enumerate(symbols)}
        names = [ir.StringAttr(s.attributes["symbol_name"]).value for s in symbols]
        block = func_op.regions[0].blocks[0]
        args = list(block.arguments)
        ret = collect(func_op, lambda o: o.name == "func.return")[-1]
        returned = list(ret.operands)
        result_maps = [None] * len(returned)
        for bind in binds:
            value = bind.operands[0]
            shape = _global_map(bind, positions, len(symbols))
            if value in args:
                set_arg_attr(func_op, args.index(value), SHAPE_ATTR, ir.AffineMapAttr.get(shape))
            for i, r in enumerate(returned):
                if r == value:
                    result_maps[i] = shape
            bind.erase()
        index = ir.IndexType.get()
        i64 = ir.IntegerType.get_signless(64)
        for s, name in zip(symbols, names):
            with ir.InsertionPoint(s), s.location:
                ir.Operation.create(SYMBOL_OP_NAME, results=[index], attributes={
                    "name": ir.StringAttr.get(name),
                    "min": ir.IntegerAttr.get(i64, _int_attr(s, "min_val")),
                    "max": ir.IntegerAttr.get(i64, _int_attr(s, "max_val")),
                    "divisor": ir.IntegerAttr.get(i64, divisors.get(name, 1))})
            if list(s.results[0].uses):
                raise ValueError(f"ember-shape-import: symbol {name} is used by "
                                 f"{next(iter(s.results[0].uses)).owner.name}")
            s.erase()
        func_op.attributes[SYMBOLS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in names])
        func_op.attributes[RESULT_SHAPES_ATTR] = ir.ArrayAttr.get([
            ir.AffineMapAttr.get(m if m is not None else _unbound_map(len(symbols)))
            for m in result_maps])
