"""ember-shape-to-arguments: the sizes calling convention of a dynamic-shape graph.

The compiled function keeps one bare pointer per tensor (the static ABI) and takes the
ember_shape symbols as trailing `index` arguments: the runtime evaluates them once per
call from the input sizes. Each dynamic buffer argument becomes a 0-d memref (a bare
pointer) re-viewed with the sizes its `ember_shape.shape` expression gives, so every
`memref.dim` folds to a symbol; a symbol with a divisibility fact is rebuilt as
`(s / d) * d`, which tells LLVM its low bits are zero (no remainder loop when d is a
multiple of the vector width). Outputs with dynamic shapes are written in place: the
buffer that buffer-results-to-out-params copies into an out-param becomes a view of it.

    before: func @forward(%a: memref<?x8xf32> {ember_shape.shape = ()[s0] -> (s0, 8)},
                          %out: memref<?xf32>) attributes {ember_shape.symbols = ["s77"], ...}
              %s0 = "ember_shape.symbol"() {name = "s77", divisor = 1, ...} : () -> index
              %buf = memref.alloc(%s0) : memref<?xf32>
              ... writes %buf ...
              memref.copy %buf, %out
    after:  func @forward(%a: memref<f32>, %out: memref<f32>, %s0: index)
              %av = memref.reinterpret_cast %a to offset: [0], sizes: [%s0, 8], strides: [8, 1]
              %ov = memref.reinterpret_cast %out to offset: [0], sizes: [%s0], strides: [1]
              ... writes %ov ...

Runs after buffer-results-to-out-params (out-params are the trailing arguments, one per
result in `ember_shape.result_shapes` order) and before the deallocation pipeline.
"""
from torch_mlir import ir
from torch_mlir.dialects import affine, arith, memref

from ember.compiler.ir_walk import collect, constant_attr, defining_op, entry_functions
from ember.compiler.passes.shape_import import (RESULT_SHAPES_ATTR, SHAPE_ATTR, SYMBOLS_ATTR,
                                                arg_attr)
from ember.dialects.shape import SYMBOL_OP_NAME

PASS_NAME = "ember-shape-to-arguments"


class ShapeAbiError(ValueError):
    pass


def _is_dynamic_identity(t):
    return (isinstance(t, ir.MemRefType) and not t.has_static_shape
            and t.affine_map == ir.AffineMap.get_identity(t.rank))


def _symbols_to_arguments(func_op, block, anchor):
    """Replace each ember_shape.symbol by a new trailing index argument (divisor facts
    computed before `anchor`)."""
    index = ir.IndexType.get()
    symbol_ops = collect(func_op, lambda o: o.name == SYMBOL_OP_NAME)
    values = []
    for op in symbol_ops:
        arg = block.add_argument(index, op.location)
        divisor = ir.IntegerAttr(op.attributes["divisor"]).value
        value = arg
        if divisor > 1:
            with ir.InsertionPoint(anchor), op.location:
                d = arith.ConstantOp(index, divisor).result
                value = arith.MulIOp(arith.DivUIOp(arg, d).result, d).result
        op.results[0].replace_all_uses_with(value)
        values.append(value)
        op.erase()
    return values


def _size_values(shape, symbols, t):
    """Index values of the sizes `shape` gives (static dims of `t`: None)."""
    index = ir.IndexType.get()
    sizes = []
    for k, expr in enumerate(shape.results):
        if not t.is_dynamic_dim(k):
            sizes.append(None)
            continue
        expr = expr.maybe_downcast()
        if isinstance(expr, ir.AffineSymbolExpr):
            sizes.append(symbols[expr.position])
        elif isinstance(expr, ir.AffineConstantExpr):
            sizes.append(arith.ConstantOp(index, expr.value).result)
        else:
            single = ir.AffineMap.get(0, shape.n_symbols, [expr])
            sizes.append(affine.AffineApplyOp(single, symbols).result)
    return sizes


def reinterpret_as(base, t, sizes):
    """`base` (a 0-d memref: one pointer) viewed as the identity-layout memref type `t`
    with `sizes` (index values; None for t's static dims), at the insertion point."""
    index = ir.IndexType.get()
    dynamic = ir.ShapedType.get_dynamic_size()
    static_sizes = [dynamic if s is not None else t.shape[k] for k, s in enumerate(sizes)]
    dyn_sizes = [s for s in sizes if s is not None]
    strides, static_strides, running, running_static = [], [], None, 1
    for k in reversed(range(t.rank)):
        if running is None:
            static_strides.append(running_static)
        else:
            static_strides.append(dynamic)
            strides.append(running)
        if sizes[k] is None:
            running_static *= t.shape[k]
            if running is not None:
                running = arith.MulIOp(running, arith.ConstantOp(index, t.shape[k]).result).result
        else:
            base_stride = (arith.ConstantOp(index, running_static).result if running is None
                           else running)
            running = arith.MulIOp(base_stride, sizes[k]).result
    return memref.ReinterpretCastOp(t, base, [], dyn_sizes, strides[::-1], [0], static_sizes,
                                    static_strides[::-1]).result


def _view(arg, shape, symbols):
    """Retype the dynamic buffer argument `arg` to a 0-d memref and view it back with the
    sizes `shape` gives; every use reads the view."""
    t = ir.MemRefType(arg.type)
    if len(shape.results) != t.rank:
        raise ShapeAbiError(f"{PASS_NAME}: shape {shape} for a rank-{t.rank} buffer")
    sizes = _size_values(shape, symbols, t)
    arg.set_type(ir.MemRefType.get([], t.element_type))
    view = reinterpret_as(arg, t, sizes)
    arg.replace_all_uses_except(view, defining_op(view))
    return view


def _write_in_place(func_op, out_arg):
    """The alloc copied into `out_arg` at the end is replaced by `out_arg` itself."""
    for copy in collect(func_op, lambda o: o.name == "memref.copy"):
        source, target = copy.operands
        if target != out_arg:
            continue
        alloc = defining_op(source)
        if alloc is None or alloc.name != "memref.alloc" or source.type != out_arg.type:
            return
        others = [u.owner for u in source.uses if u.owner != copy]
        if any(o.name in ("func.return", "memref.dealloc") for o in others):
            return
        copy.erase()
        source.replace_all_uses_with(out_arg)
        alloc.erase()
        return


def shape_to_arguments(module_op, pass_=None):
    for func_op in entry_functions(module_op):
        if SYMBOLS_ATTR not in func_op.attributes:
            continue
        block = func_op.regions[0].blocks[0]
        results = [ir.AffineMapAttr(a).value
                   for a in ir.ArrayAttr(func_op.attributes[RESULT_SHAPES_ATTR])]
        args = list(block.arguments)
        first_out = len(args) - len(results)
        for j, out in enumerate(args[first_out:]):
            if _is_dynamic_identity(out.type):
                _write_in_place(func_op, out)
        # The first op that stays (the symbol ops are erased).
        anchor = next(o for o in block.operations if o.operation.name != SYMBOL_OP_NAME)
        symbols = _symbols_to_arguments(func_op, block, anchor)
        with ir.InsertionPoint(anchor), anchor.location:
            for i, arg in enumerate(args):
                if not _is_dynamic_identity(arg.type):
                    if isinstance(arg.type, ir.MemRefType) and not arg.type.has_static_shape:
                        raise ShapeAbiError(f"{PASS_NAME}: argument {i} has a dynamic "
                                            f"non-identity layout {arg.type}")
                    continue
                if i >= first_out:
                    shape = results[i - first_out]
                else:
                    attr = arg_attr(func_op, i, SHAPE_ATTR)
                    if attr is None:
                        raise ShapeAbiError(f"{PASS_NAME}: argument {i} ({arg.type}) has no "
                                            "ember_shape.shape")
                    shape = ir.AffineMapAttr(attr).value
                _view(arg, shape, symbols)
        func_op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], []))
        for name in (SYMBOLS_ATTR, RESULT_SHAPES_ATTR, "arg_attrs"):
            if name in func_op.attributes:
                del func_op.attributes[name]
