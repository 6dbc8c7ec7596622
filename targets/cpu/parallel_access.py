"""Tell LLVM that the innermost loop of every `scf.parallel` has independent iterations.

LLVM's loop vectorizer must prove that a loop's stores do not feed its loads across
iterations. On bare pointers it can only check at run time, pointer pair by pointer
pair, and gives up past a handful of pairs: a fused kernel with seven buffers (AdamW's
update of param, exp_avg, exp_avg_sq from grad) stays scalar. And when a kernel writes
in place (the optimizer's `p.add_(...)`, compiler/in_place_outputs.py) the run-time
check sees the overlap and takes the scalar loop. Yet ember knows the answer: the loop
came from a parallel dim of a linalg op, whose iterations are independent by definition
(ember already deals them out to threads). LLVM's way to be told is a parallel loop:
every memory access of the loop in an access group named by the loop's
`llvm.loop.parallel_accesses` metadata.

Two passes, one on each side of the LLVM conversion:

- `ember-mark-parallel-loops` (scf, before convert-scf-to-cf): each scf.parallel with no
  loop inside becomes nested scf.for loops, the innermost carrying the loop annotation
  (convert-scf-to-cf moves `llvm.*` attributes of an scf.for onto its back edge):

      scf.parallel (%i, %j) = ... {                scf.for %i = ... {
        %x = memref.load %a[%i, %j]        ->        scf.for %j = ... {
        memref.store %x, %b[%i, %j]                    %x = memref.load %a[%i, %j]
      }                                                memref.store %x, %b[%i, %j]
                                                     } {llvm.loop_annotation =
                                                        #llvm.loop_annotation<
                                                          parallelAccesses = #group>}}

- `ember-parallel-access-groups` (LLVM dialect): the annotation becomes the back edge's
  `loop_annotation`, and every load and store of that loop's blocks joins its group:

      ^body: %x = llvm.load %p {access_groups = [#group]}
             llvm.store %x, %q {access_groups = [#group]}
             llvm.br ^header(%next) {loop_annotation = #llvm.loop_annotation<
                                       parallelAccesses = #group>}

A loop holding a call that touches memory is not treated as parallel by LLVM (such a
call joins no group): it is then vectorized, or not, as before.
"""
from torch_mlir import ir
from torch_mlir.dialects import scf

from ember.compiler.ir_walk import collect

MARK_PASS_NAME = "ember-mark-parallel-loops"
GROUPS_PASS_NAME = "ember-parallel-access-groups"
_ANNOTATION = "llvm.loop_annotation"
# An llvm-dialect value: convert-scf-to-cf carries it to the back edge with the annotation.
_GROUP = "ember.access_group"
_LOOPS = ("scf.for", "scf.parallel", "scf.while", "scf.forall")
_MEMORY_OPS = ("llvm.load", "llvm.store")


def _innermost_parallel(op):
    if op.name != "scf.parallel" or len(op.results) or \
            not len(op.regions[0].blocks[0].arguments):
        return False
    return not collect(op, lambda o: o != op and o.name in _LOOPS)


def _group_and_annotation(context):
    """A fresh access group and the loop annotation naming it. `distinct[0]` means one
    attribute within one parse, and a new one in each parse: one group per loop."""
    pair = ir.ArrayAttr(ir.Attribute.parse(
        "[#llvm.access_group<id = distinct[0]<>>, #llvm.loop_annotation<parallelAccesses = "
        "#llvm.access_group<id = distinct[0]<>>>]", context))
    return pair[0], pair[1]


def _to_nested_fors(loop, group, annotation):
    """scf.parallel (no reductions) -> scf.for nest; the innermost for gets `annotation`
    (and `group`, for ember-parallel-access-groups to find)."""
    body = loop.regions[0].blocks[0]
    n = len(body.arguments)
    operands = list(loop.operands)
    lbs, ubs, steps = operands[:n], operands[n:2 * n], operands[2 * n:3 * n]
    ivs, insertion = [], ir.InsertionPoint(loop)
    for d in range(n):
        with insertion, loop.location:
            nest = scf.ForOp(lbs[d], ubs[d], steps[d])
        with ir.InsertionPoint(nest.body), loop.location:
            yield_ = scf.YieldOp([])
        ivs.append(nest.induction_variable)
        insertion = ir.InsertionPoint(yield_)
    nest.operation.attributes[_ANNOTATION] = annotation
    nest.operation.attributes[_GROUP] = group
    for op in list(body.operations)[:-1]:  # all but the scf.reduce terminator
        op.move_before(yield_)
    for arg, iv in zip(body.arguments, ivs):
        arg.replace_all_uses_with(iv)
    loop.erase()


def mark_parallel_loops(module_op, pass_=None):
    loops = collect(module_op, _innermost_parallel)
    for loop in loops:
        _to_nested_fors(loop, *_group_and_annotation(module_op.context))


def _blocks_of_loop(header, latch):
    """The natural loop of back edge latch -> header: blocks reaching the latch without
    passing through the header."""
    loop, pending = [header], [latch] if latch != header else []
    while pending:
        block = pending.pop()
        if block in loop:
            continue
        loop.append(block)
        pending.extend(block.predecessors)
    return loop


def parallel_access_groups(module_op, pass_=None):
    branches = collect(module_op, lambda o: o.name in ("llvm.br", "llvm.cond_br")
                       and _ANNOTATION in o.attributes)
    for branch in branches:
        annotation = branch.attributes[_ANNOTATION]
        del branch.attributes[_ANNOTATION]
        if _GROUP not in branch.attributes:
            continue
        groups = ir.ArrayAttr.get([branch.attributes[_GROUP]], module_op.context)
        del branch.attributes[_GROUP]
        latch, header = branch.block, branch.successors[0]
        for block in _blocks_of_loop(header, latch):
            for op in block.operations:
                if op.name in _MEMORY_OPS:
                    op.attributes["access_groups"] = groups
        branch.attributes["loop_annotation"] = annotation
