"""ember-plan-workspace: the entry function's temporary buffers become slices of one
workspace argument, laid out at compile time by liveness.

A malloc/free pair per intermediate per call costs more than the allocation itself:
glibc hands large blocks back to the kernel, so the next call page-faults them in again
(a tenth of BERT's run time, more once loops run on several threads). With static shapes
the whole plan is known ahead: each `memref.alloc` with a `memref.dealloc` in the same
block gets an offset in a byte buffer such that buffers alive at the same time never
overlap; the runtime allocates that buffer once per compiled graph. The byte size is
left on the module as `ember.workspace_bytes`. With dynamic shapes the same liveness plan
is made with byte sizes that are expressions of the size arguments (dynamic_workspace.py).
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, memref

from ember.compiler.ir_walk import entry_functions, is_identity_static_memref
from .dynamic_workspace import plan_dynamic_workspace, workspace_expression

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


# Ops whose memref result aliases their first operand.
VIEW_OPS = ("memref.expand_shape", "memref.collapse_shape", "memref.subview",
          "memref.reinterpret_cast", "memref.cast", "memref.view", "memref.transpose")


def _top_level(op, block):
    while op is not None and op.block != block:
        op = op.parent
    return op


def _last_use(alloc, block, position, dealloc_at):
    """Position in `block` of the last op using `alloc` or a view of it: the deallocation
    pipeline frees at the end of the block, not after the last use. An alias that flows
    anywhere else (a loop result, a call) keeps the buffer alive until its dealloc."""
    last, pending = position[alloc], [alloc.results[0]]
    while pending:
        value = pending.pop()
        for use in value.uses:
            owner = use.owner.operation
            if owner.name == "memref.dealloc":
                continue
            if owner.name in VIEW_OPS and use.operand_number == 0:
                pending.extend(owner.results)
            elif any(isinstance(r.type, ir.MemRefType) for r in owner.results):
                return dealloc_at
            top = _top_level(owner, block)
            if top is None:
                return dealloc_at
            last = max(last, position[top])
    return last


def _intervals(block, dynamic=False):
    """(alloc op, first, last use, bytes) for each plannable alloc of `block` (`dynamic`:
    every alloc, bytes None)."""
    allocs, ends, position = [], {}, {}
    for i, op in enumerate(block.operations):
        op = op.operation
        position[op] = i
        if op.name == "memref.alloc" and dynamic:
            allocs.append((op, i, None))
        elif op.name == "memref.alloc" and not list(op.operands):
            size = _static_bytes(op.results[0].type)
            if size is not None:
                allocs.append((op, i, size))
        elif op.name == "memref.dealloc":
            ends[op.operands[0]] = i
    return [(a, first, _last_use(a, block, position, ends[a.results[0]]), size)
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


def _first_size_argument(block):
    """Position of the first of the trailing `index` arguments (the size arguments of a
    dynamic-shape graph, ember-shape-to-arguments), or None."""
    args = list(block.arguments)
    k = len(args)
    while k and isinstance(args[k - 1].type, ir.IndexType):
        k -= 1
    return k if k < len(args) else None


def plan_workspace(module_op, pass_=None):
    entries = entry_functions(module_op)
    if len(entries) != 1:
        return  # the runtime passes one workspace to one entry function
    entry = entries[0]
    block = entry.regions[0].blocks[0]
    first_size = _first_size_argument(block)
    if first_size is not None:
        intervals = [(a, f, l) for a, f, l, _ in _intervals(block, dynamic=True)]
        plan_dynamic_workspace(module_op, entry, block, intervals, first_size)
        return
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
    """The workspace size the lowered `module` expects as its last argument: bytes (0:
    none), or for a dynamic-shape graph a Python expression of its size arguments `z`."""
    attrs = module.operation.attributes
    if SIZE_ATTR in attrs:
        return ir.IntegerAttr(attrs[SIZE_ATTR]).value
    return workspace_expression(module) or 0
