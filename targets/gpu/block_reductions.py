"""ember-gpu-block-reductions: a reduction loop nest -> one block per output element,
its threads splitting the reduction and combining their partials in shared memory.

On memrefs, after ember-gpu-parallel-dims-first, for a linalg.generic with one trailing
reduction dimension, one output, and a body ending in a combiner of the running value
(`%s = arith.addf %x, %out ; linalg.yield %s`; also mulf, max/min, integer add/mul,
bitwise and/or/xor):

    linalg.generic {iterators = [par, par, red]} ins(%a) outs(%o) { x = f(a); out + x }
  ->
    gpu.launch blocks(%b) in (%P0 * %P1) threads(%t) in (128)
               workgroup(%partial : memref<128xT, #gpu.address_space<workgroup>>) {
      (p0, p1) = delinearize(%b)
      if %t < R: partial[t] = f(a[p0, p1, t]) + f(a[p0, p1, t + 128]) + ...
      gpu.barrier
      for s in 64, 32, ..., 1:                       (a tree over min(R, 128) partials)
        if t < s and t + s < min(R, 128): partial[t] = partial[t] + partial[t + s]
        gpu.barrier
      if t == 0 and R > 0: o[p0, p1] = o[p0, p1] + partial[0]
    }

Neighbouring threads read neighbouring elements of the reduced dimension (coalesced when
it is the contiguous one). Other reductions keep one thread per output element.
"""
from torch_mlir import ir
from torch_mlir.dialects import affine, arith, gpu, memref, scf

from ember.compiler.ir_walk import clone_remapped, collect, named
from .launches import delinearize, new_launch

PASS_NAME = "ember-gpu-block-reductions"
THREADS = 128
MIN_REDUCTION = 64  # shorter reductions: one thread per output is as good
COMBINERS = {"arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf",
             "arith.maxnumf", "arith.minnumf", "arith.addi", "arith.muli", "arith.maxsi",
             "arith.minsi", "arith.maxui", "arith.minui", "arith.andi", "arith.ori",
             "arith.xori"}


def _index(v):
    return arith.ConstantOp(ir.IndexType.get(), v).result


def _combiner(generic):
    """(combiner op, the combined value's index among its operands) or None."""
    body = generic.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    out = body.arguments[len(body.arguments) - 1]
    if len(ops) < 2 or ops[-1].name != "linalg.yield" or ops[-2].name not in COMBINERS:
        return None
    combine = ops[-2]
    if ops[-1].operands[0] != combine.result or out not in list(combine.operands):
        return None
    if sum(1 for u in out.uses) != 1 or combine.operands[0] == combine.operands[1]:
        return None
    return combine, 1 - list(combine.operands).index(out)


def _loop_bounds(generic, n_loops):
    """Per loop: (operand, position) whose map result is exactly that loop's dim."""
    found = {}
    maps = [m.value for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    for operand, m in zip(generic.operands, maps):
        for pos, expr in enumerate(m.results):
            if isinstance(expr, ir.AffineDimExpr):
                found.setdefault(ir.AffineDimExpr(expr).position, (operand, pos))
    return [found.get(d) for d in range(n_loops)]


def _size(operand, pos):
    t = ir.MemRefType(operand.type)
    if t.shape[pos] >= 0:
        return _index(t.shape[pos])
    return memref.dim(operand, _index(pos))


def _eligible(generic):
    if generic.results or len(generic.regions[0].blocks[0].arguments) != len(generic.operands):
        return None
    iterators = [str(a) for a in ir.ArrayAttr(generic.attributes["iterator_types"])]
    if not iterators or "reduction" not in iterators[-1] or \
            any("reduction" in i for i in iterators[:-1]):
        return None
    try:
        for v in generic.operands:
            ir.MemRefType(v.type)
    except ValueError:  # a scalar operand
        return None
    maps = [m.value for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    out_map = maps[-1]
    if any(isinstance(e, ir.AffineDimExpr) and ir.AffineDimExpr(e).position == len(iterators) - 1
           for e in out_map.results):
        return None
    combiner = _combiner(generic)
    bounds = _loop_bounds(generic, len(iterators))
    if combiner is None or None in bounds:
        return None
    red = ir.MemRefType(bounds[-1][0].type).shape[bounds[-1][1]]
    if 0 <= red < MIN_REDUCTION:
        return None
    return combiner, bounds, maps


def _apply(m, ivs):
    out = []
    for expr in m.results:
        if isinstance(expr, ir.AffineDimExpr):
            out.append(ivs[ir.AffineDimExpr(expr).position])
        elif isinstance(expr, ir.AffineConstantExpr):
            out.append(_index(ir.AffineConstantExpr(expr).value))
        else:
            out.append(affine.apply(ir.AffineMap.get(m.n_dims, m.n_symbols, [expr]), ivs))
    return out


def _element(generic, maps, ivs, combine, skip_index):
    """The combined value at loop position `ivs` (the body without its combiner)."""
    body = generic.regions[0].blocks[0]
    mapping = {}
    args = list(body.arguments)
    for j, (operand, arg) in enumerate(zip(list(generic.operands)[:-1], args[:-1])):
        if sum(1 for _ in arg.uses):
            mapping[arg] = memref.load(operand, _apply(maps[j], ivs))
    ops = [o.operation for o in body.operations]
    for op in ops[:-2]:
        if op.name == "linalg.index":
            mapping[op.result] = ivs[ir.IntegerAttr(op.attributes["dim"]).value]
            continue
        clone_remapped(op, mapping)
    value = combine.operands[skip_index]
    return mapping.get(value, value)


def _combine(combine, a, b):
    op = combine.clone()  # at the current insertion point
    op.operands[0], op.operands[1] = a, b
    return op.result


def _to_block_reduction(generic, combiner, bounds, maps):
    combine, x_index = combiner
    element_type = ir.MemRefType(generic.operands[-1].type).element_type
    n = len(bounds)
    with ir.InsertionPoint(generic), generic.location:
        sizes = [_size(*b) for b in bounds]
        rows = sizes[0]
        for s in sizes[1:-1]:
            rows = arith.muli(rows, s)
        if n == 1:
            rows = _index(1)
        launch, body = new_launch(rows, _index(THREADS))
        workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
        shared_type = ir.MemRefType.get([THREADS], element_type, memory_space=workgroup)
        partial = body.add_argument(shared_type, generic.location)
        launch.attributes["workgroup_attributions"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), 1)
    bx, tx = body.arguments[0], body.arguments[3]
    R = sizes[-1]
    with ir.InsertionPoint(body), generic.location:
        ivs = delinearize(bx, sizes[:-1]) + [None]
        c_threads = _index(THREADS)
        valid = arith.minui(R, c_threads)
        has = arith.cmpi(arith.CmpIPredicate.ult, tx, R)
        first_if = scf.IfOp(has)
        with ir.InsertionPoint(first_if.then_block):
            first = _element(generic, maps, ivs[:-1] + [tx], combine, x_index)
            start = arith.addi(tx, c_threads)
            loop = scf.ForOp(start, R, c_threads, [first])
            with ir.InsertionPoint(loop.body):
                x = _element(generic, maps, ivs[:-1] + [loop.induction_variable], combine,
                             x_index)
                scf.YieldOp([_combine(combine, loop.inner_iter_args[0], x)])
            memref.store(loop.results[0], partial, [tx])
            scf.YieldOp([])
        gpu.BarrierOp()
        s = THREADS // 2
        while s >= 1:
            cs = _index(s)
            partner = arith.addi(tx, cs)
            active = arith.andi(arith.cmpi(arith.CmpIPredicate.ult, tx, cs),
                                arith.cmpi(arith.CmpIPredicate.ult, partner, valid))
            step_if = scf.IfOp(active)
            with ir.InsertionPoint(step_if.then_block):
                a = memref.load(partial, [tx])
                b = memref.load(partial, [partner])
                memref.store(_combine(combine, a, b), partial, [tx])
                scf.YieldOp([])
            gpu.BarrierOp()
            s //= 2
        zero = _index(0)
        last = arith.andi(arith.cmpi(arith.CmpIPredicate.eq, tx, zero),
                          arith.cmpi(arith.CmpIPredicate.ugt, R, zero))
        last_if = scf.IfOp(last)
        with ir.InsertionPoint(last_if.then_block):
            out = generic.operands[-1]
            where = _apply(maps[-1], ivs[:-1] + [zero])
            total = memref.load(partial, [zero])
            old = memref.load(out, where)
            operands = [None, None]
            operands[1 - x_index], operands[x_index] = old, total
            memref.store(_combine(combine, *operands), out, where)
            scf.YieldOp([])
        gpu.TerminatorOp()
    generic.erase()


def block_reductions(module_op, pass_=None):
    for fn in collect(module_op, named("func.func")):
        if not fn.regions[0].blocks:
            continue
        for op in list(fn.regions[0].blocks[0].operations):
            op = op.operation
            if op.name != "linalg.generic":
                continue
            found = _eligible(op)
            if found is not None:
                _to_block_reduction(op, *found)
