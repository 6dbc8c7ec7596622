"""ember-merge-elementwise: multi-output and sibling fusion of elementwise loop nests.

linalg's elementwise fusion moves a producer into its consumer only when the consumer is
its single use, so a value that is both stored and read again (an optimizer's updated
moment, the input of GELU's `x * cdf(x)`, a residual branch) stays a loop nest of its
own and is written to memory and read back. This pass merges two all-parallel
`linalg.generic`s over the same iteration space into one generic with several results:

    %a = linalg.generic ins(%x) outs(%e0) { ... yield %ya }       // also returned
    %b = linalg.generic ins(%a, %y) outs(%e1) { ^bb0(%ia, %iy, %o): ... use %ia ... }
  ->
    %m:2 = linalg.generic ins(%x, %y) outs(%e0, %e1) {
      ... %ya = ...  ... uses of %ia become %ya ...  yield %ya, %yb }

It merges
  * a producer into a consumer that reads it element for element (identity map), keeping
    the producer's result as an extra output only while something else still reads it;
  * siblings: two generics reading one whole tensor, so it is read once;
  * tiny generics (0-d step counters of an optimizer, ...) with each other.
The merged op sits where the later of the two was when no other use of the earlier op's
results lies between them, else where the earlier one was when everything the later one
reads is defined by then; otherwise they stay apart (no use before its definition, no
cycle).
"""
import math

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ember.compiler.ir_walk import collect, defining_op, named
from .linalg_queries import indexing_maps, is_identity_map, is_reduction_generic, num_inputs

PASS_NAME = "ember-merge-elementwise"
_UNMERGEABLE = "ember.unmergeable"

# Generics with at most this many iterations are merged with each other even when they
# share no data: each loop nest costs more to enter than to run.
TINY_ITERATIONS = 16
# A merged loop nest with more operands than this is left alone: past it LLVM's
# vectorizer stops proving the pointers apart, and one wide loop is not faster.
MAX_OPERANDS = 12
# Tiny loop nests are not vectorized; but every merge rebuilds the whole op, so a chain of
# merges is quadratic in its operands: at 256, ConvNeXt's AdamW step spent 1.8 s here, at
# 32 0.6 s, for 64 loop nests instead of 57 (a call of a tiny one costs nanoseconds).
MAX_TINY_OPERANDS = 32


def _space(op):
    """The iteration space (static loop sizes) of a mergeable generic, or None."""
    if op.name != "linalg.generic" or not op.results or is_reduction_generic(op):
        return None
    maps = indexing_maps(op)
    n_in = num_inputs(op)
    shapes = set()
    for value, m in zip(list(op.operands)[n_in:], maps[n_in:]):
        if not isinstance(value.type, ir.RankedTensorType) or not is_identity_map(m):
            return None
        t = ir.RankedTensorType(value.type)
        if not t.has_static_shape:
            return None
        shapes.add(tuple(t.shape))
    if len(shapes) != 1 or _UNMERGEABLE in op.attributes:
        return None
    return shapes.pop()


def _ancestor_in(block, op):
    while op is not None and op.block != block:
        op = op.parent
    return op


def _can_merge(a, b, max_operands):
    """Where a (earlier) and b (later), in one block and one space, can become one op:
    "down" (at b: no other use of a's results lies between them), "up" (at a: every
    other operand of b is defined before a), or None."""
    block = b.block
    if a.block != block or not a.is_before_in_block(b):
        return None
    n_in_b = num_inputs(b)
    maps_b = indexing_maps(b)
    a_results = list(a.results)
    internal = sum(1 for v in b.operands if v in a_results)
    if len(a.operands) + len(b.operands) - internal > max_operands:
        return None
    for i, v in enumerate(b.operands):
        if v in a_results and (i >= n_in_b or not is_identity_map(maps_b[i])):
            return None  # b reads a elsewhere than element for element, or writes into it
    if all(_after(b, use.owner.operation) for r in a_results for use in r.uses):
        return "down"
    if all(v in a_results or _is_static_empty(v) or _defined_before(v, a) for v in b.operands) \
            and all(_defined_before(v, a) for v in _captured(b)):
        return "up"
    return None


def _captured(op):
    """Values op's body uses that are defined outside it (constants, extracted scalars)."""
    inside = op.regions[0].blocks[0]
    found = []
    for o in inside.operations:
        for v in o.operands:
            owner = v.owner
            if isinstance(owner, ir.Block):
                if owner != inside:
                    found.append(v)
            elif owner.operation.parent != op:
                found.append(v)
    return found


def _is_static_empty(value):
    """An init operand the merged op can create afresh wherever it is placed."""
    d = defining_op(value)
    return d is not None and d.name == "tensor.empty" and not d.operands


def _after(b, user):
    """Is `user` b itself or (through its ancestor in b's block) after b?"""
    if user == b:
        return True
    top = _ancestor_in(b.block, user)
    return top is not None and b.is_before_in_block(top)


def _defined_before(value, a):
    d = defining_op(value)
    if d is None:  # a block argument: there before any op of the block
        return True
    top = _ancestor_in(a.block, d)
    return top is None or top.is_before_in_block(a)


def _used_elsewhere(result, b):
    return any(use.owner.operation != b for use in result.uses)


def _merge(a, b, where):
    """Replace a and b by one generic at b ("down") or at a ("up"); return it."""
    body_a, body_b = a.regions[0].blocks[0], b.regions[0].blocks[0]
    n_in_a, n_in_b = num_inputs(a), num_inputs(b)
    maps_a, maps_b = indexing_maps(a), indexing_maps(b)
    a_results = list(a.results)
    # A producer output read only by b is not stored, unless a's body reads its init.
    keep_a = [k for k, r in enumerate(a_results)
              if _used_elsewhere(r, b) or any(True for _ in body_a.arguments[n_in_a + k].uses)]
    ins, in_maps, in_types = [], [], []

    def input_slot(value, m, elem_type):
        for k, (v, mk) in enumerate(zip(ins, in_maps)):
            if v == value and mk == m:
                return k
        ins.append(value)
        in_maps.append(m)
        in_types.append(elem_type)
        return len(ins) - 1

    slot_a = [input_slot(a.operands[i], maps_a[i], body_a.arguments[i].type) for i in range(n_in_a)]
    slot_b = [None if b.operands[i] in a_results else
              input_slot(b.operands[i], maps_b[i], body_b.arguments[i].type)
              for i in range(n_in_b)]
    outs_a = [a.operands[n_in_a + k] for k in keep_a]
    outs_b = list(b.operands)[n_in_b:]
    at = b if where == "down" else a
    if where == "up":  # b's fresh init tensors are made after a: make them again
        with ir.InsertionPoint(at), b.location:
            outs_b = [tensor.EmptyOp(ir.RankedTensorType(v.type).shape,
                                     ir.RankedTensorType(v.type).element_type).result
                      if _is_static_empty(v) else v for v in outs_b]
    out_maps = [maps_a[n_in_a + k] for k in keep_a] + maps_b[n_in_b:]
    out_types = ([body_a.arguments[n_in_a + k].type for k in keep_a] +
                 [arg.type for arg in list(body_b.arguments)[n_in_b:]])
    result_types = [a_results[k].type for k in keep_a] + [r.type for r in b.results]
    with ir.InsertionPoint(at), b.location:
        merged = linalg.GenericOp(result_types, ins, outs_a + outs_b,
                                  ir.ArrayAttr.get([ir.AffineMapAttr.get(m)
                                                    for m in in_maps + out_maps]),
                                  b.attributes["iterator_types"])
        block = merged.regions[0].blocks.append(*(in_types + out_types))
    args = list(block.arguments)
    n_in = len(ins)
    # The bodies move (no copies): a's block arguments become the merged op's, and b's
    # reads of a's results become the values a's body yields.
    a_args = [args[slot_a[i]] for i in range(n_in_a)]
    a_args += [args[n_in + keep_a.index(k)] if k in keep_a else None
               for k in range(len(a_results))]
    yields_a = _move_body(body_a, a_args)
    b_args = [yields_a[a_results.index(b.operands[i])] if slot_b[i] is None
              else args[slot_b[i]] for i in range(n_in_b)]
    b_args += args[n_in + len(keep_a):]
    yields_b = _move_body(body_b, b_args)
    with ir.InsertionPoint(block), b.location:
        terminator = linalg.YieldOp([yields_a[k] for k in keep_a] + yields_b)
    for body in (body_a, body_b):
        for op in list(body.operations)[:-1]:
            op.operation.move_before(terminator)
    for j, k in enumerate(keep_a):
        a_results[k].replace_all_uses_with(merged.results[j])
    for j, r in enumerate(b.results):
        r.replace_all_uses_with(merged.results[len(keep_a) + j])
    b.erase()
    a.erase()
    return merged.operation


def _move_body(source, new_args):
    """Point the uses of `source`'s block arguments at `new_args` (None: unused); return
    the values its yield yields. The ops are moved by the caller."""
    for old, new in zip(source.arguments, new_args):
        if new is not None:
            old.replace_all_uses_with(new)
    terminator = list(source.operations)[-1]
    return list(terminator.operands)


def _partners(b, space, tiny_last):
    """Earlier generics b may merge with, most profitable first."""
    found = []
    n_in = num_inputs(b)
    for v in list(b.operands)[:n_in]:  # producers
        d = defining_op(v)
        if d is not None and d not in found:
            found.append(d)
    for v in list(b.operands)[:n_in]:  # siblings reading the same whole tensor
        if not isinstance(v.type, ir.RankedTensorType) or math.prod(ir.RankedTensorType(v.type).shape) < 2:
            continue
        for use in v.uses:
            user = use.owner.operation
            if user != b and user not in found:
                found.append(user)
    if math.prod(space) <= TINY_ITERATIONS and tiny_last.get(space) is not None:
        found.append(tiny_last[space])
    return found


def merge_elementwise(module_op, pass_=None):
    for f in collect(module_op, named("func.func")):
        if not f.regions[0].blocks:
            continue
        tiny_last = {}
        ops = [o.operation for o in f.regions[0].blocks[0].operations]
        for op in ops:  # nested regions in a body: never merged (checked once)
            if op.name == "linalg.generic" and any(
                    len(o.regions) for o in op.regions[0].blocks[0].operations):
                op.attributes[_UNMERGEABLE] = ir.UnitAttr.get()
        for op in ops:
            space = _space(op)
            if space is None:
                continue
            limit = MAX_OPERANDS if math.prod(space) > TINY_ITERATIONS else MAX_TINY_OPERANDS
            merged = True
            while merged:
                merged = False
                for a in _partners(op, space, tiny_last):
                    where = _space(a) == space and _can_merge(a, op, limit)
                    if where:
                        if tiny_last.get(space) is not None and tiny_last[space] == a:
                            tiny_last[space] = None
                        op = _merge(a, op, where)
                        merged = True
                        break
            if math.prod(space) <= TINY_ITERATIONS:
                tiny_last[space] = op
        for op in collect(f, lambda o: _UNMERGEABLE in o.attributes):
            del op.attributes[_UNMERGEABLE]
