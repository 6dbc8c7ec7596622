"""ember-shape-exact-reshapes: a `tensor.reshape` that splits (or merges) one dim becomes
`tensor.expand_shape` (or `tensor.collapse_shape`).

torch-mlir lowers `unflatten` with more than one run-time size to `tensor.reshape` with a
shape tensor: a generic reshape that later passes cannot see through (its sizes are loads
from a buffer), which blocks fusion across it and the threading of the loops after it.
When every dim but one keeps its place and size class (static and equal, or dynamic on
both sides), the reshape is a split of that one dim, with the sizes the shape tensor holds:

    before: %s = tensor.from_elements %c32, %n, %h, %w : tensor<4xi64>
            %r = tensor.reshape %x(%s) : (tensor<32x?xf32>, tensor<4xi64>) -> tensor<32x?x?x?xf32>
    after:  %r = tensor.expand_shape %x [[0], [1, 2, 3]] output_shape [32, %n', %h', %w']
                 : tensor<32x?xf32> into tensor<32x?x?x?xf32>       (%n' = index_cast %n)

A static source dim split into dynamic ones (sizes 1 only) does not count as a candidate;
where the placement is still ambiguous the reshape stays. That a kept dynamic dim really
keeps its size is checked at run time (`cf.assert`, an error code after
ember-asserts-to-error-code; it folds away where both sides are the same symbol).
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, cf, tensor

from ember.compiler.ir_walk import collect, defining_op

PASS_NAME = "ember-shape-exact-reshapes"
_DYNAMIC = None


def _dims(t):
    t = ir.RankedTensorType(t)
    return [None if t.is_dynamic_dim(k) else t.shape[k] for k in range(t.rank)]


def _split_position(short, long):
    """The dim of `short` that becomes long[k:k+g] when every other dim keeps its size
    class, or None (none or several fit)."""
    g = len(long) - len(short) + 1
    fits = []
    for k in range(len(short)):
        kept = short[:k] + short[k + 1:]
        other = long[:k] + long[k + g:]
        if any(a != b for a, b in zip(kept, other)):
            continue
        group = long[k:k + g]
        if short[k] is not None:
            if None in group:
                continue  # a static size split into run-time ones
            product = 1
            for s in group:
                product *= s
            if product != short[k]:
                continue
        fits.append(k)
    return fits[0] if len(fits) == 1 else None


def _reassociation(rank, k, g):
    groups = [[i] for i in range(k)] + [list(range(k, k + g))] + \
             [[i + g - 1] for i in range(k + 1, rank)]
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, i) for i in grp])
                             for grp in groups])


def _as_index(value):
    index = ir.IndexType.get()
    return value if isinstance(value.type, ir.IndexType) else arith.index_cast(index, value)


def _check_kept_dims(source, elements, k, g, expanding):
    """Assert that each dynamic dim outside the split group has the size the shape
    tensor gives it."""
    src = _dims(source.type)
    index = ir.IndexType.get()
    short = len(src) if expanding else len(elements.operands)
    for i in range(short):
        if i == k:
            continue
        j = i if i < k else i + g - 1  # its position on the long side
        s_pos, o_pos = (i, j) if expanding else (j, i)
        if src[s_pos] is not None:
            continue
        have = tensor.dim(source, arith.constant(index, s_pos))
        want = _as_index(elements.operands[o_pos])
        same = arith.cmpi(arith.CmpIPredicate.eq, have, want)
        cf.assert_(same, "reshape keeps the size of every dim it does not split or merge")


def _rewrite(reshape):
    source, shape = reshape.operands
    elements = defining_op(shape)
    if elements is None or elements.name != "tensor.from_elements":
        return False
    src, out = _dims(source.type), _dims(reshape.results[0].type)
    if len(out) > len(src):
        k = _split_position(src, out)
        if k is None:
            return False
        g = len(out) - len(src) + 1
        with ir.InsertionPoint(reshape), reshape.location:
            _check_kept_dims(source, elements, k, g, expanding=True)
            casts = {}
            sizes = [casts.setdefault(size, _as_index(size)) if size not in casts
                     else casts[size] for j, size in enumerate(elements.operands)
                     if out[j] is None]
            dynamic = ir.ShapedType.get_dynamic_size()
            new = tensor.ExpandShapeOp(reshape.results[0].type, source,
                                       _reassociation(len(src), k, g), sizes,
                                       [dynamic if s is None else s for s in out]).result
    elif len(out) < len(src):
        k = _split_position(out, src)
        if k is None:
            return False
        g = len(src) - len(out) + 1
        with ir.InsertionPoint(reshape), reshape.location:
            _check_kept_dims(source, elements, k, g, expanding=False)
            new = tensor.CollapseShapeOp(reshape.results[0].type, source,
                                         _reassociation(len(out), k, g)).result
    else:
        return False
    reshape.results[0].replace_all_uses_with(new)
    reshape.erase()
    if not list(elements.results[0].uses):
        elements.erase()
    return True


def shape_exact_reshapes(module_op, pass_=None):
    for reshape in collect(module_op, lambda o: o.name == "tensor.reshape"):
        _rewrite(reshape)
