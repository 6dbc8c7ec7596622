"""ember-gpu-loops-to-launches: each top-level `scf.parallel` of a host function (one per
linalg op after convert-linalg-to-parallel-loops) -> one `gpu.launch`: the iteration
space is linearised over a 1-d grid of 1-d blocks, the innermost (contiguous) dimension
fastest, so neighbouring threads touch neighbouring elements (coalesced access).

    scf.parallel (%i, %j) = (0, 0) to (%M, %N) step (1, 1) { body(%i, %j) }
  ->
    %total = %M * %N ; %grid = ceildiv(%total, 256)
    gpu.launch blocks(%bx, ..) in (%grid, 1, 1) threads(%tx, ..) in (256, 1, 1) {
      %lin = %bx * 256 + %tx
      scf.if %lin < %total { %j = %lin rem %N ; %i = %lin div %N ; body(%i, %j) }
      gpu.terminator
    }

A reduction dimension stays an `scf.for` inside the body (one thread per output element;
block-level reductions are future work). A top-level sequential loop (a scan) becomes a
kernel of one thread. Works for symbolic bounds: the host computes
%total and %grid from the run-time sizes. Host-side loads and stores (anything left
outside a launch that touches memory) are refused later by the host plan.
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, gpu, scf

from ember.compiler.ir_walk import collect, named

PASS_NAME = "ember-gpu-loops-to-launches"
BLOCK_SIZE = 256


def _index(value):
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _trip_count(lb, ub, step):
    # (ub - lb + step - 1) / step, folded by canonicalize for the usual lb = 0, step = 1
    span = arith.subi(ub, lb)
    one = _index(1)
    return arith.divui(arith.addi(span, arith.subi(step, one)), step)


def new_launch(grid, block, one=None):
    """(gpu.launch over a 1-d grid of 1-d blocks, its body block) at the insertion point;
    `one`: the index 1 for the y and z sizes, when the caller has it."""
    one = one if one is not None else _index(1)
    launch = gpu.LaunchOp((grid, one, one), (block, one, one))
    return launch, launch.regions[0].blocks[0]


def delinearize(linear, sizes):
    """Positions in a row-major space of `sizes` (last fastest) of index `linear`."""
    rest, positions = linear, [None] * len(sizes)
    for d in reversed(range(len(sizes))):
        positions[d] = arith.remui(rest, sizes[d]) if d else rest
        if d:
            rest = arith.divui(rest, sizes[d])
    return positions


def _to_launch(loop):
    n = len(loop.regions[0].blocks[0].arguments)
    operands = list(loop.operands)
    lbs, ubs, steps = operands[:n], operands[n:2 * n], operands[2 * n:3 * n]
    with ir.InsertionPoint(loop), loop.location:
        counts = [_trip_count(l, u, s) for l, u, s in zip(lbs, ubs, steps)]
        total = counts[0]
        for c in counts[1:]:
            total = arith.muli(total, c)
        block = _index(BLOCK_SIZE)
        _, body = new_launch(arith.ceildivui(total, block), block)
    bx, tx = body.arguments[0], body.arguments[3]
    with ir.InsertionPoint(body), loop.location:
        lin = arith.addi(arith.muli(bx, _index(BLOCK_SIZE)), tx)
        inside = arith.cmpi(arith.CmpIPredicate.ult, lin, total)
        guard = scf.IfOp(inside)
        gpu.TerminatorOp()
    then = guard.regions[0].blocks[0]
    with ir.InsertionPoint(then), loop.location:
        ivs = [arith.addi(lb, arith.muli(position, step)) for lb, position, step in
               zip(lbs, delinearize(lin, counts), steps)]
        yield_op = scf.YieldOp([])
    loop_body = loop.regions[0].blocks[0]
    for arg, iv in zip(loop_body.arguments, ivs):
        arg.replace_all_uses_with(iv)
    for op in list(loop_body.operations):
        if op.operation.name == "scf.reduce":
            continue
        op.operation.move_before(yield_op)
    loop.erase()


def _sequential_launch(op):
    """A top-level sequential nest (a scan, a sort) -> one kernel of one thread: slow
    for big inputs, but the values stay on the device and the order is kept."""
    with ir.InsertionPoint(op), op.location:
        one = _index(1)
        _, body = new_launch(one, one, one)
    with ir.InsertionPoint(body), op.location:
        terminator = gpu.TerminatorOp()
    op.move_before(terminator)


def loops_to_launches(module_op, pass_=None):
    for fn in collect(module_op, named("func.func")):
        if not fn.regions[0].blocks:
            continue
        for op in list(fn.regions[0].blocks[0].operations):
            if op.operation.name == "scf.parallel":
                if op.operation.results:
                    raise ValueError(f"{op.location}: a parallel loop with results (a "
                                     "parallel reduction) has no GPU mapping yet")
                _to_launch(op.operation)
            elif op.operation.name in ("scf.for", "scf.while", "scf.if") and \
                    not op.operation.results:
                _sequential_launch(op.operation)
