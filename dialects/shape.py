"""The `ember_shape` dialect: what Dynamo's ShapeEnv knows about symbolic sizes, in the IR.

    %s0 = "ember_shape.symbol"() {name = "s77", min = 2 : i64, max = 4096 : i64,
                                  divisor = 8 : i64} : () -> index
    "ember_shape.bind"(%arg0, %s0, %s1) {shape = affine_map<()[s0, s1] -> (s0, s1 * 2)>}
        : (tensor<?x?xf32>, index, index) -> ()

`symbol` is the value of one size symbol during one call: the runtime passes it in (a size
argument of the compiled function) after checking the guards' facts it carries: the
value lies in [min, max] and is a multiple of `divisor`. `bind` ties every dimension of a
tensor to an affine expression of symbols (static dims are constants of the map), the way
torch-mlir's `torch.bind_symbolic_shape` does at the torch level.

The passes in compiler/passes/shape_*.py and targets/cpu/shape_arguments.py use these facts
and lower the dialect away before LLVM.
"""
from typing import Sequence, Any

from torch_mlir import ir
from torch_mlir.dialects import ext


class ShapeDialect(ext.Dialect, name="ember_shape"):
    pass


class SymbolOp(ShapeDialect.Operation, name="symbol"):
    name: ir.StringAttr
    min: ir.IntegerAttr
    max: ir.IntegerAttr
    divisor: ir.IntegerAttr
    value: ext.Result[ir.IndexType]

    @staticmethod
    def verify_invariants(op):
        attrs = op.attributes
        lo, hi = ir.IntegerAttr(attrs["min"]).value, ir.IntegerAttr(attrs["max"]).value
        divisor = ir.IntegerAttr(attrs["divisor"]).value
        if lo < 0 or lo > hi:
            op.location.emit_error(f"symbol range [{lo}, {hi}] is empty or negative")
            return False
        if divisor < 1:
            op.location.emit_error(f"symbol divisor must be >= 1, got {divisor}")
            return False
        return True


class BindOp(ShapeDialect.Operation, name="bind"):
    tensor: ext.Operand[Any]
    symbols: Sequence[ext.Operand[ir.IndexType]]
    shape: ir.AffineMapAttr

    @staticmethod
    def verify_invariants(op):
        shape = ir.AffineMapAttr(op.attributes["shape"]).value
        value_type = op.operands[0].type
        if not isinstance(value_type, (ir.RankedTensorType, ir.MemRefType)):
            op.location.emit_error(f"binds a ranked tensor or memref, not {value_type}")
            return False
        rank = value_type.rank
        if len(shape.results) != rank:
            op.location.emit_error(f"shape has {len(shape.results)} results for a rank-{rank} "
                                   "value")
            return False
        if shape.n_dims != 0 or shape.n_symbols != len(op.operands) - 1:
            op.location.emit_error(f"shape must have 0 dims and one symbol per symbol operand "
                                   f"({len(op.operands) - 1}), got {shape}")
            return False
        for k, expr in enumerate(shape.results):
            if not value_type.is_dynamic_dim(k):
                if not (isinstance(expr, ir.AffineConstantExpr)
                        and expr.value == value_type.shape[k]):
                    op.location.emit_error(f"static dim {k} of size {value_type.shape[k]} is "
                                           f"bound to {expr}")
                    return False
        return True


SYMBOL_OP_NAME = SymbolOp.OPERATION_NAME
BIND_OP_NAME = BindOp.OPERATION_NAME


# Function attributes the shape passes and the symbolic importer share.
SYMBOLS_ATTR = "ember_shape.symbols"
SHAPE_ATTR = "ember_shape.shape"
RESULT_SHAPES_ATTR = "ember_shape.result_shapes"
DIVISORS_ATTR = "ember_shape.divisors"


def set_arg_attr(func_op, index, name, attr):
    n = len(func_op.regions[0].blocks[0].arguments)
    old = (list(ir.ArrayAttr(func_op.attributes["arg_attrs"]))
           if "arg_attrs" in func_op.attributes else [ir.DictAttr.get({})] * n)
    entries = {a.name: a.attr for a in ir.DictAttr(old[index])}
    entries[name] = attr
    old[index] = ir.DictAttr.get(entries)
    func_op.attributes["arg_attrs"] = ir.ArrayAttr.get(old)


def arg_attr(func_op, index, name):
    if "arg_attrs" not in func_op.attributes:
        return None
    entries = ir.DictAttr(list(ir.ArrayAttr(func_op.attributes["arg_attrs"]))[index])
    return entries[name] if name in entries else None
