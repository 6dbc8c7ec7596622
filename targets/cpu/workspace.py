"""ember-plan-workspace: the entry function's temporary buffers become slices of one
workspace argument, laid out at compile time by liveness.

A malloc/free pair per intermediate per call costs more than the allocation itself:
glibc hands large blocks back to the kernel, so the next call page-faults them in again
(a tenth of BERT's run time, more once loops run on several threads). With static shapes
the whole plan is known ahead: each `memref.alloc` with a `memref.dealloc` in the same
block gets an offset in a byte buffer such that buffers alive at the same time never
overlap; the runtime allocates that buffer once per compiled graph. The byte size is
left on the module as `ember.workspace_bytes`.
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, memref

from ember.compiler.ir_walk import entry_functions, is_identity_static_memref

PASS_NAME = "ember-plan-workspace"
SIZE_ATTR = "ember.workspace_bytes"
_ALIGN = 64


def _static_bytes(t):
    if not is_identity_static_memref(t):
        return None
    width = t.element_type.width if hasattr(t.element_type, "width") else None
    if not width or width % 8:
        return None
    count = 1
    for s in t.shape:
        count *= s
    return count * width // 8


def _intervals(block):
    """(alloc op, first, last, bytes) for each plannable alloc of `block`."""
    allocs, ends = [], {}
    for i, op in enumerate(block.operations):
        op = op.operation
        if op.name == "memref.alloc" and not list(op.operands):
            size = _static_bytes(op.results[0].type)
            if size is not None:
                allocs.append((op, i, size))
        elif op.name == "memref.dealloc":
            ends[op.operands[0]] = i
    return [(a, first, ends[a.results[0]], size)
            for a, first, size in allocs if a.results[0] in ends]


def _place(intervals):
    """Offsets: largest first, each at the lowest aligned gap free during its lifetime."""
    placed, offsets = [], {}
    for idx in sorted(range(len(intervals)), key=lambda i: -intervals[i][3]):
        _, first, last, size = intervals[idx]
        busy = sorted((off, end) for (off, end, f, l) in placed if f <= last and first <= l)
        offset = 0
        for off, end in busy:
            if offset + size <= off:
                break
            offset = max(offset, -(-end // _ALIGN) * _ALIGN)
        placed.append((offset, offset + size, first, last))
        offsets[idx] = offset
    total = max((end for _, end, _, _ in placed), default=0)
    return offsets, -(-total // _ALIGN) * _ALIGN


def plan_workspace(module_op, pass_=None):
    entries = entry_functions(module_op)
    if len(entries) != 1:
        return  # the runtime passes one workspace to one entry function
    entry = entries[0]
    block = entry.regions[0].blocks[0]
    intervals = _intervals(block)
    if not intervals:
        return
    offsets, total = _place(intervals)
    with module_op.context, entry.location:
        ws_type = ir.MemRefType.get([total], ir.IntegerType.get_signless(8))
        workspace = block.add_argument(ws_type, entry.location)
        fn_type = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value)
        entry.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(fn_type.inputs) + [ws_type], list(fn_type.results)))
        index = ir.IndexType.get()
        for idx, (alloc, _, _, _) in enumerate(intervals):
            with ir.InsertionPoint(alloc):
                shift = arith.constant(index, offsets[idx])
                view = memref.view(alloc.results[0].type, workspace, shift, [])
            value = alloc.results[0]
            for use in list(value.uses):
                if use.owner.operation.name == "memref.dealloc":
                    use.owner.operation.erase()
            value.replace_all_uses_with(view)
            alloc.erase()
        module_op.attributes[SIZE_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                             total)


def workspace_bytes(module):
    """The workspace size the lowered `module` expects as its last argument (0: none)."""
    attrs = module.operation.attributes
    return ir.IntegerAttr(attrs[SIZE_ATTR]).value if SIZE_ATTR in attrs else 0
