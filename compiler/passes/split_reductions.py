"""ember-split-reductions: a long floating-point sum becomes a sum of block sums, for
eager's accuracy at the speed of one fused pass.

A reduction loop adds into a few vector accumulators: summing 2^28 floats that way is
millions of serial additions per accumulator (relative error 3.7e-2, where eager's
cascade sum gives 1e-7). The fused generic (prologue included) is split so that each
partial sum covers BLOCK elements, then the partials are summed:

    before: %r = linalg.generic {maps [(d0, d1) -> (d0, d1), (d0, d1) -> (d0)],
                                 iterators [parallel, reduction]}
                   ins(%x : tensor<64x1048576xf32>) outs(%zeros : tensor<64xf32>)
                   { exp, mulf, %s = addf %v, %out; yield %s }
    after:  %p = linalg.generic {maps [(d0, d1, d2) -> (d0, d1 * 512 + d2),
                                       (d0, d1, d2) -> (d0, d1)],
                                 iterators [parallel, parallel, reduction]}
                   ins(%x) outs(%zeros2 : tensor<64x2048xf32>) { same body }
            %r = linalg.generic {... [parallel, reduction]} ins(%p) outs(%zeros)
                   { addf %in, %out }            (split again while still long)

Applies to generics with one result, one reduction dim of static length >= MIN_LENGTH
divisible by a block size, and an `addf(value, out)` combiner. The first level reads the
data once like the original; the next levels touch 1/BLOCK of it. Model-sized reductions
(softmax, layer norm over a hidden dim) are shorter than MIN_LENGTH and stay as they are.
"""
import re

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from ember.compiler.ir_walk import collect, named
from .linalg_queries import indexing_maps, iterator_names

PASS_NAME = "ember-split-reductions"
MIN_LENGTH = 1 << 13
BLOCKS = (512, 256, 128, 64)


def _combiner_input(op):
    """The value v of a body ending `%s = arith.addf v, %out; linalg.yield %s` (the
    output's block argument used there only), else None."""
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    out_arg = body.arguments[len(body.arguments) - 1]
    if len(ops) < 2 or ops[-1].name != "linalg.yield" or ops[-2].name != "arith.addf":
        return None
    add, yielded = ops[-2], ops[-1].operands[0]
    if yielded != add.results[0]:
        return None
    lhs, rhs = add.operands
    uses = [u for o in ops for u in o.operands if u == out_arg]
    if len(uses) != 1 or out_arg not in (lhs, rhs):
        return None
    if any(len(o.regions) for o in ops):
        return None
    return rhs if lhs == out_arg else lhs


def _map_text(m):
    return str(m).replace("affine_map<", "").rstrip(">") if str(m).startswith("affine_map<") else str(m)


def _renumber(expr_text, r):
    """Dims after d_r move up by one (d_r itself becomes the block index d_r)."""
    return re.sub(r"\bd(\d+)\b",
                  lambda k: f"D#{int(k.group(1)) + (int(k.group(1)) > r)}", expr_text
                  ).replace("D#", "d")


def _map_results(m):
    _, results = _map_text(m).split("->")
    inner = results.strip()[1:-1].strip()
    return [e.strip() for e in inner.split(",")] if inner else []


def _split_input(value, m, r, block, n_dims):
    """(operand, map over n+1 dims): an input indexed by d_r at result k is expanded at
    dim k into (n / block, block), indexed by (d_r, d_r+1); None if d_r appears in a
    compound expression (not splittable this way)."""
    results = _map_results(m)
    dims = ", ".join(f"d{i}" for i in range(n_dims + 1))
    direct = [k for k, e in enumerate(results) if e == f"d{r}"]
    if any(re.search(rf"\bd{r}\b", e) for k, e in enumerate(results) if k not in direct):
        return None
    if len(direct) > 1:
        return None
    new_results = [_renumber(e, r) for e in results]
    if not direct:
        return value, ir.Attribute.parse(f"affine_map<({dims}) -> ({', '.join(new_results)})>")
    k = direct[0]
    new_results[k:k + 1] = [f"d{r}", f"d{r + 1}"]
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    shape[k:k + 1] = [shape[k] // block, block]
    groups, j = [], 0
    for i in range(t.rank):
        groups.append([j, j + 1] if i == k else [j])
        j += len(groups[-1])
    reassociation = ir.ArrayAttr.get([ir.ArrayAttr.get(
        [ir.IntegerAttr.get(ir.IntegerType.get_signless(64), g) for g in group])
        for group in groups])
    expanded = tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, t.element_type), value,
                                    reassociation, [], shape).result
    return expanded, ir.Attribute.parse(f"affine_map<({dims}) -> ({', '.join(new_results)})>")


def _with_dim(m, r, n_dims):
    """The output map over n+1 dims, d_r (the block index) appended as a new last result."""
    _, results = _map_text(m).split("->")
    renamed = re.sub(r"\bd(\d+)\b", lambda k: f"D#{int(k.group(1)) + (int(k.group(1)) > r)}",
                     results).replace("D#", "d").strip()
    inner = renamed[1:-1].strip()
    inner = f"{inner}, d{r}" if inner else f"d{r}"
    dims = ", ".join(f"d{i}" for i in range(n_dims + 1))
    return ir.Attribute.parse(f"affine_map<({dims}) -> ({inner})>")


def _zeros(shape, element_type):
    empty = tensor.EmptyOp(shape, element_type).result
    zero = arith.ConstantOp(element_type, 0.0).result
    return linalg.fill(zero, outs=[empty])


def _clone_body(source, target_block):
    """Clone the ops of block `source` into `target_block`, block arguments mapped in order."""
    mapping = list(zip(source.arguments, target_block.arguments))

    def mapped(v):
        for old, new in mapping:
            if old == v:
                return new
        return v

    with ir.InsertionPoint(target_block):
        for old in source.operations:
            new = old.operation.clone()
            for i, v in enumerate(list(new.operands)):
                replacement = mapped(v)
                if replacement is not v:
                    new.operands[i] = replacement
            mapping.extend(zip(old.results, new.results))


def _split_one(op):
    iterators = iterator_names(op)
    if len(op.results) != 1 or iterators.count("reduction") != 1:
        return None
    r = iterators.index("reduction")
    ranges = _static_loop_ranges(op)
    if ranges is None or ranges[r] < MIN_LENGTH:
        return None
    n = ranges[r]
    block = next((b for b in BLOCKS if n % b == 0 and n // b >= 2), None)
    out_type = ir.RankedTensorType(op.results[0].type)
    element = out_type.element_type
    if block is None or not isinstance(element, (ir.F32Type, ir.F64Type, ir.F16Type, ir.BF16Type)):
        return None
    if _combiner_input(op) is None:
        return None
    maps = indexing_maps(op)
    for m in maps[:-1]:
        results = _map_results(m)
        uses = [e for e in results if re.search(rf"\bd{r}\b", e)]
        if len(uses) > 1 or (uses and uses[0] != f"d{r}"):
            return None
    n_inputs = len(op.operands) - 1
    init = op.operands[n_inputs]
    n_dims = len(iterators)
    partial_shape = list(out_type.shape) + [n // block]
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    new_iterators = [ir.Attribute.parse(f"#linalg.iterator_type<{k}>") for k in iterators]
    new_iterators[r:r + 1] = [parallel, reduction]
    with ir.InsertionPoint(op), op.location:
        partial_init = _zeros(partial_shape, element)
        partial_type = ir.RankedTensorType.get(partial_shape, element)
        split = [_split_input(v, m, r, block, n_dims)
                 for v, m in zip(list(op.operands)[:n_inputs], maps[:n_inputs])]
        ins = [s[0] for s in split]
        in_maps = [s[1] for s in split]
        first = linalg.GenericOp([partial_type], ins, [partial_init],
                                 ir.ArrayAttr.get(in_maps + [_with_dim(maps[-1], r, n_dims)]),
                                 ir.ArrayAttr.get(new_iterators))
        old_body = op.regions[0].blocks[0]
        new_body = first.regions[0].blocks.append(*[a.type for a in old_body.arguments])
        _clone_body(old_body, new_body)
        rank = out_type.rank
        d = [f"d{i}" for i in range(rank + 1)]
        identity = ir.Attribute.parse(f"affine_map<({', '.join(d)}) -> ({', '.join(d)})>")
        drop_last = ir.Attribute.parse(f"affine_map<({', '.join(d)}) -> ({', '.join(d[:-1])})>")
        second = linalg.GenericOp([out_type], [first.results[0]], [init],
                                  ir.ArrayAttr.get([identity, drop_last]),
                                  ir.ArrayAttr.get([parallel] * rank + [reduction]))
        body = second.regions[0].blocks.append(element, element)
        with ir.InsertionPoint(body):
            total = arith.AddFOp(body.arguments[0], body.arguments[1]).result
            linalg.YieldOp([total])
    op.results[0].replace_all_uses_with(second.results[0])
    op.erase()
    return second


def _static_loop_ranges(op):
    """Loop sizes from the operand shapes (the first operand dim each loop dim indexes
    directly), or None when some size is not static."""
    maps = indexing_maps(op)
    n_dims = len(iterator_names(op))
    ranges = [None] * n_dims
    for value, m in zip(op.operands, maps):
        t = value.type
        if not isinstance(t, ir.RankedTensorType):
            return None
        _, results = _map_text(m).split("->")
        for k, expr in enumerate(results.strip()[1:-1].split(",")):
            match = re.fullmatch(r"\s*d(\d+)\s*", expr)
            if match and ranges[int(match.group(1))] is None and not t.is_dynamic_dim(k):
                ranges[int(match.group(1))] = t.shape[k]
    return None if any(s is None for s in ranges) else ranges


def split_reductions(module_op, pass_=None):
    work = collect(module_op, named("linalg.generic"))
    while work:
        op = work.pop()
        second = _split_one(op)
        if second is not None:
            work.append(second.operation)  # split again while still long
