"""ember-shape-resolve-dims: every size read from a bound tensor becomes its symbol.

torch-mlir's lowering reads each size it needs with `tensor.dim` from whichever operand
it has at hand, so two dims that Dynamo knows to be the same symbol are two unrelated
values, and the shape checks between them (`cf.assert %a == %b`) survive. With the sizes
replaced by the symbols (or their affine expressions), CSE and canonicalization see what
the ShapeEnv saw: equal sizes are one SSA value, checks between them fold away, loop
bounds and `tensor.empty` sizes come straight from the symbols.

    before: %s0 = "ember_shape.symbol"() {name = "s77", ...} : () -> index
            %d0 = tensor.dim %arg0, %c0 : tensor<?x8xf32>     // arg0: (s0, 8)
            %d1 = tensor.dim %arg1, %c0 : tensor<?xf32>       // arg1: (s0 * 2)
            %ok = arith.cmpi eq, %d0, %d0b : index
    after:  %s0 = "ember_shape.symbol"() ...
            %e = affine.apply affine_map<()[s0] -> (s0 * 2)>()[%s0]
            (uses of %d0 -> %s0, of %d1 -> %e; `cmpi eq %s0, %s0` then folds)

The binding comes from the function arguments' `ember_shape.shape` attributes
(ember-shape-import) and from `ember_shape.bind` ops, which are erased here.
"""
from torch_mlir import ir
from torch_mlir.dialects import affine, arith

from ember.compiler.ir_walk import collect, constant_attr, entry_functions
from ember.dialects.shape import BIND_OP_NAME, SYMBOL_OP_NAME
from .shape_import import SHAPE_ATTR, arg_attr

PASS_NAME = "ember-shape-resolve-dims"


def _bound_shapes(func_op, symbols):
    """{value: (AffineMap, [symbol values])} for the arguments and bind ops of a function."""
    bound = {}
    for i, arg in enumerate(func_op.regions[0].blocks[0].arguments):
        attr = arg_attr(func_op, i, SHAPE_ATTR)
        if attr is not None:
            bound[arg] = (ir.AffineMapAttr(attr).value, symbols)
    for bind in collect(func_op, lambda o: o.name == BIND_OP_NAME):
        operands = list(bind.operands)
        bound.setdefault(operands[0], (ir.AffineMapAttr(bind.attributes["shape"]).value,
                                       operands[1:]))
        bind.erase()
    return bound


class _Materializer:
    """Creates each size expression once, right after the symbols (dominating all uses)."""

    def __init__(self, anchor):
        self.anchor, self.cache = anchor, {}

    def value(self, shape, operands, k):
        expr = shape.results[k].maybe_downcast()
        index = ir.IndexType.get()
        if isinstance(expr, ir.AffineSymbolExpr):
            return operands[expr.position]
        key = (str(expr), tuple(id(v) for v in operands))
        if key not in self.cache:
            with ir.InsertionPoint(self.anchor), self.anchor.location:
                if isinstance(expr, ir.AffineConstantExpr):
                    self.cache[key] = arith.ConstantOp(index, expr.value).result
                else:
                    single = ir.AffineMap.get(0, shape.n_symbols, [expr])
                    self.cache[key] = affine.AffineApplyOp(single, list(operands)).result
        return self.cache[key]


def shape_resolve_dims(module_op, pass_=None):
    for func_op in entry_functions(module_op):
        symbol_ops = collect(func_op, lambda o: o.name == SYMBOL_OP_NAME)
        symbols = [o.results[0] for o in symbol_ops]
        bound = _bound_shapes(func_op, symbols)
        if not bound:
            continue
        block = func_op.regions[0].blocks[0]
        # After the last symbol (or at the top): every bound size is defined there.
        ops = list(block.operations)
        last = max((i for i, o in enumerate(ops) if o.operation in symbol_ops), default=-1)
        anchor = ops[last + 1].operation
        sizes = _Materializer(anchor)
        for arg, (shape, operands) in bound.items():
            if isinstance(arg.type, ir.IntegerType) and isinstance(arg, ir.BlockArgument):
                # A size passed as an int: its uses read the symbol instead.
                with ir.InsertionPoint(anchor), anchor.location:
                    value = arith.IndexCastOp(arg.type, sizes.value(shape, operands, 0)).result
                arg.replace_all_uses_with(value)
        resolved = []
        for dim in collect(func_op, lambda o: o.name == "tensor.dim"):
            source, index = dim.operands
            k = constant_attr(index)
            if source not in bound or k is None:
                continue
            shape, operands = bound[source]
            dim.results[0].replace_all_uses_with(
                sizes.value(shape, operands, ir.IntegerAttr(k).value))
            resolved.append(dim)
        for dim in resolved:  # last: the anchor may be one of them
            dim.erase()
