"""The workspace of a dynamic-shape graph: temporaries sized by expressions of the sizes.

With run-time sizes the byte offsets cannot be numbers, but the liveness plan can still
be made at compile time: buffers whose lifetimes never overlap share a slot, a slot is as
big as its biggest member (`maxui` of their byte sizes), and slot k starts where slot
k-1 ends. The entry function computes these offsets from its size arguments once, at its
top; the runtime sizes the workspace with the same formula, emitted as a Python
expression over the size arguments `z` (a few integer operations per call) and left on
the module as `ember.workspace_expr`.

    before: func @forward(%x: memref<f32>, %out: memref<f32>, %s0: index)
              %t = memref.alloc(%s0) : memref<?x64xf32>
              ... uses of %t ...
              memref.dealloc %t : memref<?x64xf32>
    after:  func @forward(%x: memref<f32>, %out: memref<f32>, %s0: index, %ws: memref<i8>)
              %b = arith.muli %s0, %c256 : index            // bytes of %t
              %n = <align %b to 64>                          // slot 0: [0, %n)
              %ws1 = memref.reinterpret_cast %ws to sizes: [%n], strides: [1]
              %p = memref.view %ws1[%c0][] : memref<?xi8> to memref<f32>
              %t = memref.reinterpret_cast %p to sizes: [%s0, 64], strides: [64, 1]
              ... uses of %t ...
    module attributes {ember.workspace_expr = "-(-(z[0]*256) // 64) * 64"}

Only allocations whose sizes are pure index arithmetic of the size arguments (what
ember-shape-to-arguments leaves) are planned; any other stays a malloc.
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, memref

from ember.compiler.ir_walk import constant_attr, defining_op

EXPR_ATTR = "ember.workspace_expr"
ALIGN = 64

_BINARY = {"arith.muli": "{} * {}", "arith.addi": "{} + {}", "arith.subi": "{} - {}",
           "arith.divui": "{} // {}", "arith.divsi": "tdiv({}, {})",
           "arith.floordivsi": "{} // {}", "arith.ceildivui": "-(-{} // {})",
           "arith.ceildivsi": "-(-{} // {})", "arith.remui": "{} % {}",
           "arith.remsi": "trem({}, {})", "arith.maxui": "max({}, {})",
           "arith.maxsi": "max({}, {})", "arith.minui": "min({}, {})",
           "arith.minsi": "min({}, {})"}
# Casts between integer widths and index: sizes are small non-negative numbers.
_PASS_THROUGH = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui",
                 "arith.trunci")
# arith.cmpi predicates (eq, ne, slt, sle, sgt, sge, ult, ule, ugt, uge)
_COMPARE = ["==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">="]
# `tdiv`/`trem` (C's rounding toward zero) are defined where the runtime evaluates the
# text: ember/runtime/workspace_size.py.


class SizeExpressions:
    """Python statements and entry-block copies of index values computed from the size
    arguments (block arguments from `first_size` on). Each computed value gets one
    temporary `tN`, so a value used twice (a select's operands) is computed once."""

    def __init__(self, block, first_size):
        self.block, self.first_size = block, first_size
        self._text, self._copies = {}, {}
        self.statements = []

    def text(self, value, depth=0):
        """A Python name or literal holding `value` over `z` after `statements`, or None
        when it is not size arithmetic."""
        if value in self._text:
            return self._text[value]
        result = None
        if isinstance(value, ir.BlockArgument):
            if value.owner == self.block and value.arg_number >= self.first_size \
                    and isinstance(value.type, ir.IndexType):
                result = f"z[{value.arg_number - self.first_size}]"
        elif depth < 64:
            result = self._op_text(defining_op(value), depth)
        self._text[value] = result
        return result

    def _temporary(self, expression):
        name = f"t{len(self.statements)}"
        self.statements.append(f"{name} = {expression}")
        return name

    def _op_text(self, op, depth):
        if op is None:
            return None
        if op.name == "arith.constant":
            attr = constant_attr(op.results[0])
            if not isinstance(op.results[0].type, (ir.IndexType, ir.IntegerType)):
                return None
            value = ir.IntegerAttr(attr).value
            return str(int(value != 0) if _is_i1(op.results[0].type) else value)
        if op.name == "memref.dim":
            return self.text(_folded_dim(op), depth + 1) if _folded_dim(op) else None
        args = [self.text(v, depth + 1) for v in op.operands]
        if None in args:
            return None
        if op.name in _PASS_THROUGH:
            return args[0]
        if op.name in _BINARY:
            return self._temporary(_BINARY[op.name].format(*args))
        if op.name == "arith.cmpi":
            predicate = ir.IntegerAttr(op.attributes["predicate"]).value
            return self._temporary(f"int({args[0]} {_COMPARE[predicate]} {args[1]})")
        if op.name == "arith.select":
            return self._temporary(f"{args[1]} if {args[0]} else {args[2]}")
        if op.name == "affine.apply":
            amap = ir.AffineMapAttr(op.attributes["map"]).value
            return self._temporary(_affine_text(amap.results[0], args[:amap.n_dims],
                                                args[amap.n_dims:]))
        return None

    def copy_at_top(self, value, ip):
        """`value` re-computed at `ip` (the block's top) from the arguments and constants."""
        if isinstance(value, ir.BlockArgument):
            return value
        if value in self._copies:
            return self._copies[value]
        op = defining_op(value)
        if op.name == "memref.dim":
            self._copies[value] = self.copy_at_top(_folded_dim(op), ip)
            return self._copies[value]
        operands = [self.copy_at_top(v, ip) for v in op.operands]
        clone = op.clone(ip)
        for i, v in enumerate(operands):
            clone.operands[i] = v
        self._copies[value] = clone.results[0]
        return clone.results[0]


def _is_i1(t):
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 1


def _folded_dim(dim):
    """The index value that `memref.dim %v, %c` reads when %v comes from a view or an
    alloc that holds that size as an operand (canonicalize folds only some of these), or
    None."""
    source, index = dim.operands
    owner, k = defining_op(source), constant_attr(index)
    if owner is None or k is None:
        return None
    k = ir.IntegerAttr(k).value
    dynamic = ir.ShapedType.get_dynamic_size()
    if owner.name == "memref.alloc":
        t = ir.MemRefType(source.type)
        if not t.is_dynamic_dim(k):
            return None
        return owner.operands[sum(1 for j in range(k) if t.is_dynamic_dim(j))]
    if owner.name in ("memref.reinterpret_cast", "memref.subview"):
        static, first = list(ir.DenseI64ArrayAttr(owner.attributes["static_sizes"])), None
        if len(static) != ir.MemRefType(source.type).rank:
            return None  # a rank-reducing subview
        segments = list(ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"]))
        first = segments[0] + segments[1]  # source, offsets..., sizes..., strides...
    elif owner.name == "memref.expand_shape":
        static, first = list(ir.DenseI64ArrayAttr(owner.attributes["static_output_shape"])), 1
    else:
        return None
    if k >= len(static) or static[k] != dynamic:
        return None
    return owner.operands[first + sum(1 for s in static[:k] if s == dynamic)]


def _affine_text(expr, dims, symbols):
    expr = expr.maybe_downcast()
    if isinstance(expr, ir.AffineConstantExpr):
        return str(expr.value)
    if isinstance(expr, ir.AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, ir.AffineSymbolExpr):
        return symbols[expr.position]
    lhs, rhs = _affine_text(expr.lhs, dims, symbols), _affine_text(expr.rhs, dims, symbols)
    if isinstance(expr, ir.AffineAddExpr):
        return f"({lhs} + {rhs})"
    if isinstance(expr, ir.AffineMulExpr):
        return f"({lhs} * {rhs})"
    if isinstance(expr, ir.AffineFloorDivExpr):
        return f"({lhs} // {rhs})"
    if isinstance(expr, ir.AffineCeilDivExpr):
        return f"(-(-{lhs} // {rhs}))"
    if isinstance(expr, ir.AffineModExpr):
        return f"({lhs} % {rhs})"
    raise ValueError(f"unknown affine expression {expr}")


def element_bytes(t):
    width = t.element_type.width if hasattr(t.element_type, "width") else None
    return width // 8 if width and width % 8 == 0 else None


def alloc_bytes(alloc, sizes):
    """(bytes of the static dims, Python text of the whole byte size) of `alloc`
    (identity layout), or None."""
    t = ir.MemRefType(alloc.results[0].type)
    if t.affine_map != ir.AffineMap.get_identity(t.rank) or element_bytes(t) is None:
        return None
    static = element_bytes(t)
    for k in range(t.rank):
        if not t.is_dynamic_dim(k):
            static *= t.shape[k]
    parts = [sizes.text(v) for v in alloc.operands]
    if None in parts:
        return None
    return static, "*".join([str(static)] + parts)


def _slots(intervals):
    """Members per slot: each interval joins a slot free during its lifetime (one with
    the same byte expression first), else opens a new one."""
    slots = []  # [last use, [interval indices], set of byte texts]
    for idx in sorted(range(len(intervals)), key=lambda i: intervals[i][1]):
        _, first, last, text = intervals[idx]
        free = [s for s in slots if s[0] < first]
        same = [s for s in free if text in s[2]]
        slot = (same or free or [None])[0]
        if slot is None:
            slot = [last, [], set()]
            slots.append(slot)
        slot[0] = max(slot[0], last)
        slot[1].append(idx)
        slot[2].add(text)
    return [s[1] for s in slots]


def _aligned(value_or_text, index=None):
    if index is None:  # Python text
        return f"(-(-{value_or_text} // {ALIGN}) * {ALIGN})"
    a = arith.constant(index, ALIGN)
    return arith.muli(arith.ceildivui(value_or_text, a), a)


def plan_dynamic_workspace(module_op, entry, block, intervals, first_size):
    """intervals: (alloc op, first, last) per plannable alloc of the entry `block`."""
    sizes = SizeExpressions(block, first_size)
    planned = [(a, f, l, alloc_bytes(a, sizes)) for a, f, l in intervals]
    statics = [p[3][0] for p in planned if p[3] is not None]
    planned = [(a, f, l, b[1]) for a, f, l, b in planned if b is not None]
    if not planned:
        return
    slots = _slots(planned)
    index = ir.IndexType.get()
    top = ir.InsertionPoint.at_block_begin(block)
    with module_op.context, entry.location:
        workspace = block.add_argument(ir.MemRefType.get([], ir.IntegerType.get_signless(8)),
                                       entry.location)
        fn_type = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value)
        entry.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            list(fn_type.inputs) + [workspace.type], list(fn_type.results)))
        offsets, texts = {}, []
        with top:
            offset = arith.constant(index, 0)
            for members in slots:
                slot_bytes = None
                for idx in members:
                    alloc = planned[idx][0]
                    b = arith.constant(index, statics[idx])
                    for v in alloc.operands:
                        b = arith.muli(b, sizes.copy_at_top(v, top))
                    slot_bytes = b if slot_bytes is None else arith.maxui(slot_bytes, b)
                    offsets[idx] = offset
                offset = arith.addi(offset, _aligned(slot_bytes, index))
                member_texts = sorted({planned[i][3] for i in members})
                texts.append(_aligned(member_texts[0] if len(member_texts) == 1 else
                                      f"max({', '.join(member_texts)})"))
            base = memref.ReinterpretCastOp(
                ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], workspace.type.element_type),
                workspace, [], [offset], [], [0], [ir.ShapedType.get_dynamic_size()], [1]).result
        from .shape_arguments import reinterpret_as
        for idx, (alloc, _, _, _) in enumerate(planned):
            t = ir.MemRefType(alloc.results[0].type)
            with ir.InsertionPoint(alloc), alloc.location:
                if t.has_static_shape:
                    view = memref.view(t, base, offsets[idx], [])
                else:
                    pointer = memref.view(ir.MemRefType.get([], t.element_type), base,
                                          offsets[idx], [])
                    dynamic = iter(alloc.operands)
                    dims = [next(dynamic) if t.is_dynamic_dim(k) else None for k in range(t.rank)]
                    view = reinterpret_as(pointer, t, dims)
            value = alloc.results[0]
            for use in list(value.uses):
                if use.owner.operation.name == "memref.dealloc":
                    use.owner.operation.erase()
            value.replace_all_uses_with(view)
            alloc.erase()
        body = sizes.statements + [f"return {' + '.join(texts)}"]
        module_op.attributes[EXPR_ATTR] = ir.StringAttr.get("; ".join(body))


def workspace_expression(module):
    """The Python expression over the size arguments `z` of the workspace's byte size a
    lowered dynamic-shape `module` expects (None: a static size or none)."""
    attrs = module.operation.attributes
    return ir.StringAttr(attrs[EXPR_ATTR]).value if EXPR_ATTR in attrs else None
