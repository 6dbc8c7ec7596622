"""ember-fuse-reduction-rows: a layer norm / softmax / RMS norm becomes ONE loop over its
rows, each row computed start to finish while it is in cache (issue: multi-output fusion).

Fusion groups stop at a reduction: a layer norm was five loop nests (sum, subtract and
square, sum, normalise, ...) with three full-size temporaries between them, every one a
pass over memory. Here the last elementwise op of such a chain is tiled on the dims its
reductions keep (rows of one element each: `scf.forall`), and every producer whose
results are used only inside the chain is fused into that loop (MLIR's tile-and-fuse,
driven by a transform script built per chain):

    before: %s  = generic {parallel, parallel, reduction} ins(%x : 8x512x128) -> 8x512
            %d:2 = generic {parallel x3} ins(%x, %s) -> 8x512x128, 8x512x128  (x - mean, ^2)
            %v  = generic {parallel, parallel, reduction} ins(%d#1) -> 8x512
            %y  = generic {parallel x3} ins(%d#0, %v, %gamma) -> 8x512x128
    after:  %y = scf.forall (%i, %j) in (8, 512) shared_outs(%o = ...) {
              %xr = extract_slice %x[%i, %j, 0] [1, 1, 128]
              %s = generic (reduction) ins(%xr) -> 1x1;  %d:2 = generic ins(%xr, %s) -> 1x1x128
              %v = generic (reduction) ins(%d#1) -> 1x1; %yr = generic ins(%d#0, %v, ...)
              parallel_insert_slice %yr into %o[%i, %j, 0] }

The temporaries are one row each: bufferized, they are small scratch buffers that
`ember-loop-scratch-on-stack` turns into stack slots. Unit dims are folded first
(linalg-fold-unit-extent-dims) so that keepdim reshapes do not cut the chain. Chains
with a contraction (a GEMM stays ONE BLAS call), non-permutation maps (split long sums)
or nothing to tile are left as they are.
"""
from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from ember.compiler.ir_walk import defining_op, entry_functions
from ember.compiler.passes.linalg_queries import indexing_maps, iterator_names, num_inputs

PASS_NAME = "ember-fuse-reduction-rows"
_ROOT, _MEMBER = "ember_row_root", "ember_row_member"


def _dims(m):
    """Dim positions of a projected-permutation map's results, or None for other maps."""
    out = []
    for e in m.results:
        if not isinstance(e, ir.AffineDimExpr):
            return None
        out.append(e.position)
    return out


def _is_generic(op):
    return op is not None and op.name == "linalg.generic"


def _is_row_reduction(op):
    """A reduction whose every input either spans all loop dims or none of the reduced
    ones (x and a broadcast mean): not a contraction, whose inputs each miss a dim."""
    its = iterator_names(op)
    reduced = {d for d, it in enumerate(its) if it == "reduction"}
    if not reduced:
        return False
    maps = indexing_maps(op)
    if any(_dims(m) is None for m in maps):
        return False
    for m in maps[:num_inputs(op)]:
        dims = set(_dims(m))
        if dims != set(range(len(its))) and dims & reduced:
            return False
    return True


def _fusable(op):
    return _is_generic(op) and all(_dims(m) is not None for m in indexing_maps(op)) and (
        "reduction" not in iterator_names(op) or _is_row_reduction(op))


def _users(op):
    return [u.owner.operation for r in op.results for u in r.uses]


class _Chain:
    """The root op, its fused producers (closest first) and the root's tiled dims."""

    def __init__(self, root, members):
        self.root, self.members = root, members
        self.tiled = None

    def tile_dims(self):
        """The root's loop dims that index rows (dims every reduction of the chain keeps),
        propagated from the reductions through the ops' indexing maps."""
        memo = {}
        chain = set(self.members) | {self.root}

        def dims_of(op):
            if op in memo:
                return memo[op]
            memo[op] = set()
            its = iterator_names(op)
            maps = indexing_maps(op)
            n_in = num_inputs(op)
            found = {d for d, it in enumerate(its) if it == "parallel"} \
                if "reduction" in its else set()
            for operand, m in zip(list(op.operands)[:n_in], maps[:n_in]):
                producer = defining_op(operand)
                # a linalg.fill member (no indexing maps) broadcasts a scalar: no row dims
                if producer is None or producer not in chain or not _is_generic(producer):
                    continue
                result = list(producer.results).index(operand)
                out_map = indexing_maps(producer)[num_inputs(producer) + result]
                kept = dims_of(producer)
                for k, d in enumerate(_dims(out_map)):
                    if d in kept:
                        found.add(_dims(m)[k])
            reduced = {d for d, it in enumerate(its) if it == "reduction"}
            memo[op] = found - reduced
            return memo[op]

        return dims_of(self.root)


def _chains(block):
    """Chains of a function body, roots last-first; a chain holds at least one reduction."""
    ops = [o.operation for o in block.operations]
    in_block = set(ops)
    taken, chains = set(), []
    for root in reversed(ops):
        if root in taken or not _fusable(root) or "reduction" in iterator_names(root):
            continue
        # The producers whose users are all in the chain join it, until none does (the
        # set only grows, so the order of the checks does not change the result). Only
        # producers of chain members are checked: a scan of the whole block per step
        # took 16 s on ConvNeXt's backward (4.5 M operand checks).
        members, inside = [], {root}
        candidates = set()

        def add_producers(op):
            for v in op.operands:
                producer = defining_op(v)
                if producer is not None and producer in in_block:
                    candidates.add(producer)

        add_producers(root)
        changed = True
        while changed:
            changed = False
            for op in list(candidates):
                if op in inside or op in taken:
                    candidates.discard(op)
                    continue
                users = _users(op)
                if (_fusable(op) or op.name == "linalg.fill") and users \
                        and all(u in inside for u in users):
                    members.append(op)
                    inside.add(op)
                    candidates.discard(op)
                    add_producers(op)
                    changed = True
        if not any(_is_generic(m) and "reduction" in iterator_names(m) for m in members):
            continue
        chain = _Chain(root, members)
        tiled = chain.tile_dims()
        if not tiled or len(tiled) == len(iterator_names(root)):
            continue
        chain.tiled = tiled
        order = {op: i for i, op in enumerate(ops)}
        chain.members.sort(key=lambda o: -order[o])  # closest to the root first
        taken |= inside
        chains.append(chain)
    return chains


def _private_inits(chain):
    """Give every fused producer its own tensor.empty init. Shared with the root, an
    empty becomes the loop's output buffer, and a producer with another index order
    (a transpose) would write its row temporaries across other iterations' output."""
    for op in chain.members:
        n_in = num_inputs(op) if op.name == "linalg.generic" else 1
        for i in range(n_in, len(op.operands)):
            init = defining_op(op.operands[i])
            if init is not None and init.name == "tensor.empty":
                clone = init.clone(ir.InsertionPoint(op))
                op.operands[i] = clone.results[0]


def _script(chains):
    i64 = "i64"
    lines = ["module attributes {transform.with_named_sequence} {",
             "transform.named_sequence @__transform_main(%root: !transform.any_op "
             "{transform.readonly}) {"]
    for c, chain in enumerate(chains):
        sizes = ", ".join("1" if d in chain.tiled else "0"
                          for d in range(len(iterator_names(chain.root))))
        lines += [
            f'%r{c} = transform.structured.match ops{{["linalg.generic"]}} '
            f"attributes {{{_ROOT} = {c} : {i64}}} in %root "
            ": (!transform.any_op) -> !transform.any_op",
            f"%t{c}, %l{c}_0 = transform.structured.tile_using_forall %r{c} "
            f"tile_sizes [{sizes}] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)"]
        for m in range(len(chain.members)):
            lines += [
                f'%p{c}_{m} = transform.structured.match ops{{["linalg.generic", "linalg.fill"]}} '
                f"attributes {{{_MEMBER} = {c * 100000 + m} : {i64}}} in %root "
                ": (!transform.any_op) -> !transform.any_op",
                f"%f{c}_{m}, %l{c}_{m + 1} = transform.structured.fuse_into_containing_op "
                f"%p{c}_{m} into %l{c}_{m} : (!transform.any_op, !transform.any_op) -> "
                "(!transform.any_op, !transform.any_op)"]
    lines += ["transform.yield", "}", "}"]
    return "\n".join(lines)


def _clear_tags(module_op):
    def visit(o):
        for name in (_ROOT, _MEMBER):
            if name in o.attributes:
                del o.attributes[name]
        return ir.WalkResult.ADVANCE
    module_op.walk(visit)


def _has_candidates(module_op):
    found = []

    def visit(o):
        # keepdim maps ((d0, d1, 0)) are only projections after the unit-dim fold: a
        # cheap look here, the exact test on the folded IR
        if o.name == "linalg.generic" and "reduction" in iterator_names(o.operation) and any(
                _is_generic(u) and "reduction" not in iterator_names(u) for u in _users(o.operation)):
            found.append(o)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return bool(found)


def fuse_reduction_rows(module_op, _pass=None):
    if not _has_candidates(module_op):
        return
    ctx = module_op.context
    with ctx:
        PassManager.parse("builtin.module(func.func(linalg-fold-unit-extent-dims),"
                          "canonicalize,cse)").run(module_op)
    chains = []
    for fn in entry_functions(module_op):
        chains += _chains(fn.regions[0].blocks[0])
    if not chains:
        return
    with ctx:
        i64 = ir.IntegerType.get_signless(64)
        for chain in chains:
            _private_inits(chain)
        for c, chain in enumerate(chains):
            chain.root.attributes[_ROOT] = ir.IntegerAttr.get(i64, c)
            for m, op in enumerate(chain.members):
                op.attributes[_MEMBER] = ir.IntegerAttr.get(i64, c * 100000 + m)
        script = ir.Module.parse(_script(chains))
        body = module_op.regions[0].blocks[0]
        sequence = script.body.operations[0].detach_from_parent()
        body.append(sequence)
        module_op.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
        try:
            PassManager.parse("builtin.module(transform-interpreter)").run(module_op)
        finally:
            sequence.erase()
            del module_op.attributes["transform.with_named_sequence"]
            _clear_tags(module_op)
        PassManager.parse("builtin.module(canonicalize,cse)").run(module_op)


SCRATCH_PASS_NAME = "ember-loop-scratch-on-stack"
MAX_SCRATCH_BYTES = 1 << 16
_TERMINATORS = ("scf.yield", "scf.reduce", "scf.reduce.return", "scf.condition",
                "func.return", "func.call", "memref.alloca_scope.return", "scf.forall.in_parallel")


def _static_bytes(t):
    count = 1
    for s in t.shape:
        count *= s
    width = getattr(t.element_type, "width", 64)
    return count * max(width // 8, 1)


def _escapes(value, depth=0):
    """Whether a buffer (or a view of it) leaves its iteration: yielded, returned, passed
    to a call."""
    for use in value.uses:
        owner = use.owner.operation
        if owner.name in _TERMINATORS or depth > 16:
            return True
        if owner.name.startswith("memref.") and owner.name not in (
                "memref.load", "memref.store", "memref.copy", "memref.dealloc") and any(
                _escapes(r, depth + 1) for r in owner.results):
            return True
    return False


def _scratch(alloc):
    """An iteration's temporary: static, small, freed in its own block, never leaving."""
    if alloc.name != "memref.alloc" or len(alloc.operands):
        return False
    t = ir.MemRefType(alloc.results[0].type)
    if not t.has_static_shape or _static_bytes(t) > MAX_SCRATCH_BYTES:
        return False
    deallocs = [u.owner.operation for u in alloc.results[0].uses
                if u.owner.operation.name == "memref.dealloc"]
    return (len(deallocs) == 1 and deallocs[0].parent == alloc.parent
            and not _escapes(alloc.results[0]))


def loop_scratch_on_stack(module_op, _pass=None):
    """After outlining (ember-outline-parallel-loops) every function runs its loops on one
    thread, one iteration after another. An iteration's small temporaries (the one-row
    buffers of fuse_reduction_rows' loops) were a malloc + free per iteration; they become
    stack slots of the function's entry block, which LLVM promotes to registers:

        before: scf.for %i ... { %t = memref.alloc() : memref<1x1x128xf32> ... memref.dealloc %t }
        after:  %t = memref.alloca() : memref<1x1x128xf32>      (entry block)
                scf.for %i ... { ... }

    Only buffers freed in the block that allocates them and never yielded, returned or
    passed on are moved: nothing of one iteration is read by the next.
    """
    from torch_mlir.dialects import memref

    for fn in module_op.regions[0].blocks[0].operations:
        if fn.operation.name != "func.func" or not fn.regions[0].blocks:
            continue
        entry = fn.regions[0].blocks[0]
        nested = []

        def visit(o):
            if o.name == "memref.alloc" and o.parent.name in ("scf.parallel", "scf.for",
                                                                "scf.forall"):
                nested.append(o.operation)
            return ir.WalkResult.ADVANCE

        fn.operation.walk(visit)
        nested = [a for a in nested if _scratch(a)]
        if not nested:
            continue
        with fn.context, ir.Location.unknown():
            first = entry.operations[0]
            for a in nested:
                align = ir.IntegerAttr(a.attributes["alignment"]).value \
                    if "alignment" in a.attributes else None
                alloca = memref.AllocaOp(a.results[0].type, [], [], alignment=align,
                                         ip=ir.InsertionPoint(first))
                for use in list(a.results[0].uses):
                    if use.owner.operation.name == "memref.dealloc":
                        use.owner.operation.erase()
                a.results[0].replace_all_uses_with(alloca.result)
                a.erase()
