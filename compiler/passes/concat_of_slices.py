"""ember-concat-slices-to-gather: a concatenation of equally shaped slices of one tensor
becomes ONE loop nest that reads the source at the piece's offset.

ember's convolution (compiler/conv_decomposition.py) builds im2col as a stack of kh*kw
shifted slices of the padded input. torch-mlir lowers the stack to `tensor.concat`, which
bufferizes to one copy loop nest per slice: 9 kernels for a 3x3 conv, 49 for a 7x7 stem
(112 of ResNet's 129 kernels), each a fork/join at run time and a function for LLVM to
compile. Here the concat becomes one `linalg.generic` over (..., piece, piece dims...):
the piece index selects the offsets (a small constant table when they differ), and the
element is a `tensor.extract` from the common source at offset + index * stride.

    before: %a = tensor.extract_slice %x[0, 0, 0] [3, 4, 8] [1, 1, 2]
            %b = tensor.extract_slice %x[0, 0, 1] [3, 4, 8] [1, 1, 2]
            %c = tensor.concat dim(1) %a, %b : (tensor<3x4x8xf32>, tensor<3x4x8xf32>) -> tensor<3x8x8xf32>
    after:  %t = arith.constant dense<[0, 1]> : tensor<2xindex>
            %g = linalg.generic (d0, d1, d2, d3) outs(tensor<3x2x4x8xf32>) {
                   %p = linalg.index 1;  %o = tensor.extract %t[%p]
                   %w = %o + (linalg.index 3) * 2
                   tensor.extract %x[linalg.index 0, linalg.index 2, %w] }
            %c = tensor.collapse_shape %g [[0], [1, 2], [3]] : ... into tensor<3x8x8xf32>

Slices are followed through chains of slices (offsets and strides compose). Pieces with
dynamic sizes are rewritten only when each size is the same SSA value in every piece.
"""
import numpy
from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from ember.compiler.ir_walk import collect, constant_attr, defining_op

PASS_NAME = "ember-concat-slices-to-gather"
_DYNAMIC = ir.ShapedType.get_dynamic_size()
_MIN_PIECES = 2


def _mixed(op, static_name, first_operand, count):
    """The op's static/dynamic mixed list (ints, or Values for the dynamic entries)."""
    static = list(ir.DenseI64ArrayAttr(op.attributes[static_name]))
    dynamic = iter(list(op.operands)[first_operand:first_operand + count])
    return [next(dynamic) if s == _DYNAMIC else s for s in static]


def _slice_params(op):
    """(offsets, sizes, strides) of a tensor.extract_slice as mixed lists."""
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    first = segments[0]
    offsets = _mixed(op, "static_offsets", first, segments[1])
    sizes = _mixed(op, "static_sizes", first + segments[1], segments[2])
    strides = _mixed(op, "static_strides", first + segments[1] + segments[2], segments[3])
    return offsets, sizes, strides


class _Piece:
    """A slice chain down to its root: element i of the piece is root[off + i * stride]."""

    def __init__(self, value):
        self.value = value
        rank = ir.RankedTensorType(value.type).rank
        self.offsets, self.strides = [0] * rank, [1] * rank
        self.root, self.ok = value, True
        op = defining_op(value)
        while op is not None and op.name == "tensor.extract_slice":
            source = op.operands[0]
            if ir.RankedTensorType(source.type).rank != rank:
                self.ok = False  # rank-reducing: not followed
                return
            offsets, _sizes, strides = _slice_params(op)
            if any(not isinstance(s, int) for s in strides):
                self.ok = False
                return
            # index in source = off + (self.off + i * self.stride) * stride
            self.offsets = [_add(o, _mul(so, s)) for o, so, s in
                            zip(offsets, self.offsets, strides)]
            self.strides = [a * s for a, s in zip(self.strides, strides)]
            self.root = source
            op = defining_op(source)


def _mul(a, k):
    """a * k for a mixed `a` (int or Value) and an int k; Values are built lazily."""
    if isinstance(a, int):
        return a * k
    return ("mul", a, k)


def _add(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return ("add", a, b)


def _materialize(x):
    """An index Value for a mixed offset term (at the insertion point)."""
    index = ir.IndexType.get()
    if isinstance(x, int):
        return arith.constant(index, x)
    if isinstance(x, ir.Value):
        return x
    kind, a, b = x
    if kind == "mul":
        return arith.muli(_materialize(a), arith.constant(index, b))
    return arith.addi(_materialize(a), _materialize(b))


def _same(a, b):
    return a == b if isinstance(a, int) and isinstance(b, int) else a is b or (
        isinstance(a, ir.Value) and isinstance(b, ir.Value) and a == b)


def _provably_equal_sizes(pieces, piece_type):
    """Every dynamic size of every piece is the same SSA value (ember-shape-resolve-dims
    makes equal symbolic sizes one value). roll's two slices, `x[s-k:]` and `x[:s-k]`,
    share a type but not their sizes: a gather over them would be wrong, so they stay a
    concat."""
    sizes = []
    for p in pieces:
        op = defining_op(p.value)
        if op is None or op.name != "tensor.extract_slice":
            return False
        sizes.append(_slice_params(op)[1])
    return all(_same(size[d], sizes[0][d]) for size in sizes[1:]
               for d in range(piece_type.rank) if piece_type.is_dynamic_dim(d))


def _rewrite(concat):
    pieces = [_Piece(v) for v in concat.operands]
    if len(pieces) < _MIN_PIECES or not all(p.ok for p in pieces):
        return False
    root = pieces[0].root
    if root == pieces[0].value or any(p.root != root for p in pieces):
        return False
    piece_type = ir.RankedTensorType(pieces[0].value.type)
    if any(v.type != piece_type for v in concat.operands):
        return False
    if any(p.strides != pieces[0].strides for p in pieces):
        return False
    if not _provably_equal_sizes(pieces, piece_type):
        return False
    dim = ir.IntegerAttr(concat.attributes["dim"]).value
    rank, k = piece_type.rank, len(pieces)
    index = ir.IndexType.get()
    elem = piece_type.element_type
    with ir.InsertionPoint(concat), concat.location:
        sizes = [tensor.dim(pieces[0].value, arith.constant(index, d))
                 if piece_type.is_dynamic_dim(d) else piece_type.shape[d] for d in range(rank)]
        # offset per source dim: one value, or a table indexed by the piece number
        tables = []
        for d in range(rank):
            column = [p.offsets[d] for p in pieces]
            if all(isinstance(c, int) and c == 0 for c in column):
                tables.append(("zero", None))
            elif all(_same(c, column[0]) for c in column):
                tables.append(("one", _materialize(column[0])))
            elif all(isinstance(c, int) for c in column):
                table_type = ir.RankedTensorType.get([k], index)
                attr = ir.DenseElementsAttr.get(numpy.array(column, dtype=numpy.int64),
                                                type=table_type)
                tables.append(("table", arith.ConstantOp(table_type, attr).result))
            else:
                tables.append(("table", tensor.from_elements(
                    ir.RankedTensorType.get([k], index), [_materialize(c) for c in column])))
        out_shape = sizes[:dim] + [k] + sizes[dim:]
        static = [s if isinstance(s, int) else _DYNAMIC for s in out_shape]
        out_type = ir.RankedTensorType.get(static, elem)
        init = tensor.EmptyOp(out_shape, elem).result
        n = rank + 1
        identity = ir.AffineMap.get_identity(n)
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        generic = linalg.GenericOp([out_type], [], [init], ir.ArrayAttr.get(
            [ir.AffineMapAttr.get(identity)]), ir.ArrayAttr.get([parallel] * n))
        block = generic.regions[0].blocks.append(elem)
        with ir.InsertionPoint(block):
            piece = linalg.IndexOp(dim).result
            coords = []
            for d in range(rank):
                local = linalg.IndexOp(d if d < dim else d + 1).result
                kind, value = tables[d]
                stride = pieces[0].strides[d]
                scaled = local if stride == 1 else arith.muli(local,
                                                              arith.constant(index, stride))
                if kind == "zero":
                    coords.append(scaled)
                    continue
                offset = value if kind == "one" else tensor.extract(value, [piece])
                coords.append(arith.addi(offset, scaled))
            linalg.YieldOp([tensor.extract(root, coords)])
        groups = [[d] for d in range(dim)] + [[dim, dim + 1]] + \
                 [[d + 1] for d in range(dim + 1, rank)]
        i64 = ir.IntegerType.get_signless(64)
        reassociation = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, g)
                                                            for g in grp]) for grp in groups])
        result = tensor.CollapseShapeOp(concat.results[0].type, generic.results[0],
                                        reassociation).result
    concat.results[0].replace_all_uses_with(result)
    concat.erase()
    return True


def concat_slices_to_gather(module_op, pass_=None):
    for concat in collect(module_op, lambda o: o.name == "tensor.concat"):
        _rewrite(concat)
