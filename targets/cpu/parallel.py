"""Multi-threaded loop nests through the OpenMP runtime torch already runs (libgomp).

Two passes, one on each side of the LLVM conversion:

- `ember-outline-parallel-loops` (memrefs + scf): each top-level `scf.parallel` of the
  entry function with enough work moves into its own function
  `@ember_par_N(%tid: i32, %nthreads: i32, buffers...)`, which runs the slice of one
  dimension (the first with 16+ iterations, `split_dimension`) that belongs to thread
  `tid`. In its place the entry function calls `@ember_par_N_launch(buffers...)`,
  declared only.
- `ember-emit-parallel-launchers` (LLVM dialect, bare pointers): defines each launcher:
  pack the buffer pointers, `GOMP_parallel(@ember_par_N_omp, pack, 0, 0)`; the
  trampoline `@ember_par_N_omp` unpacks them and calls the kernel with its thread number.

Using torch's own libgomp (the one MKL and ATen use) shares one thread team, sized by
`torch.set_num_threads`, so nothing is oversubscribed; a parallel region opened inside
another one simply runs on one thread.
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, func, memref

from ember.compiler.ir_walk import (clone_remapped, constant_attr, defining_op, entry_functions,
                                    is_identity_static_memref, symbol_name)
from .runtime_symbols import openmp_available
from .workspace import VIEW_OPS

OUTLINE_PASS_NAME = "ember-outline-parallel-loops"
LAUNCHERS_PASS_NAME = "ember-emit-parallel-launchers"
KERNEL_PREFIX = "ember_par_"
LAUNCH_SUFFIX = "_launch"

# Below this many innermost iterations a fork/join (about a microsecond on libgomp's
# spinning team) costs more than the second thread saves; 2^12 measured faster than
# 2^15 and 2^18 on ConvNeXt / ResNet, where many loop nests are small.
MIN_PARALLEL_WORK = 1 << 12

# Ops defining a captured value that are re-created inside the kernel instead of being
# passed: constants and views of buffers (their results may have non-identity layouts,
# which a bare pointer cannot carry).
_RECREATED = ("arith.constant", "memref.get_global", "memref.subview", "memref.expand_shape",
              "memref.collapse_shape", "memref.reinterpret_cast", "memref.cast",
              # size arithmetic of dynamic shapes (pure)
              "arith.muli", "arith.addi", "arith.subi", "arith.divui", "arith.divsi",
              "arith.ceildivui", "arith.ceildivsi", "arith.floordivsi", "arith.remui",
              "arith.remsi", "arith.index_cast", "arith.minui", "arith.maxui", "arith.minsi",
              "arith.maxsi", "affine.apply", "affine.min", "affine.max", "memref.dim",
              "arith.select", "arith.cmpi", "arith.extui", "arith.trunci")

# The dimension dealt to the threads is the first one this long (a batch of 1 or 4 heads
# would leave threads idle), else the longest: at batch 1 every loop nest over
# (1, 128, 256) ran on one thread while the others spun.
SPLIT_TRIP = 16

# A dynamic trip count is not known at compile time; loops over dynamic sizes are
# assumed this long when deciding whether a loop nest has enough work for threads.
DYNAMIC_TRIP_GUESS = 64


def _const_index(value):
    attr = constant_attr(value)
    return None if attr is None else ir.IntegerAttr(attr).value


def _trip_counts(loop, dynamic=None):
    """Static trip count per dimension of an scf.parallel / scf.for, or None; a dimension
    with a run-time upper bound (constant lower bound and step) counts as `dynamic` when
    that is given."""
    n = 1 if loop.name == "scf.for" else len(loop.regions[0].blocks[0].arguments)
    ops = list(loop.operands)
    counts = []
    for d in range(n):
        lb, ub, step = (_const_index(ops[d]), _const_index(ops[n + d]),
                        _const_index(ops[2 * n + d]))
        if ub is None and dynamic is not None and None not in (lb, step) and step > 0:
            counts.append(dynamic)
            continue
        if None in (lb, ub, step) or step <= 0:
            return None
        counts.append(max(0, -(-(ub - lb) // step)))
    return counts


def split_dimension(counts):
    """Index of the loop dimension whose iterations are split across threads."""
    for d, c in enumerate(counts):
        if c >= SPLIT_TRIP:
            return d
    return max(range(len(counts)), key=lambda d: counts[d])


def _work(loop):
    """Innermost iterations of a loop nest (nested loops with unknown bounds count once)."""
    counts = _trip_counts(loop, DYNAMIC_TRIP_GUESS) or [1]
    total = 1
    for c in counts:
        total *= c
    inner = 0
    for block in loop.regions[0].blocks:
        for o in block.operations:
            if o.operation.name in ("scf.for", "scf.parallel"):
                inner += _work(o.operation)
    return total * max(inner, 1)


def _defined_inside(loop):
    values = set()

    def visit(o):
        for r in o.results:
            values.add(r)
        for region in o.regions:
            for block in region.blocks:
                for a in block.arguments:
                    values.add(a)
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return values


def _captured(loop):
    """Values used inside `loop` but defined outside it, in first-use order."""
    inside = _defined_inside(loop)
    seen, order = set(), []

    def visit(o):
        for v in o.operands:
            if v not in inside and v not in seen:
                seen.add(v)
                order.append(v)
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return order


class _Outline:
    """Plan for one loop: buffers passed as arguments, ops to re-create inside."""

    def __init__(self, loop):
        self.args, self.recreate = [], []
        self.ok = all(self._take(v) for v in _captured(loop))

    def _take(self, value, depth=0):
        if value in self.args or any(value in list(o.results) for o in self.recreate):
            return True
        owner = defining_op(value)
        if is_identity_static_memref(value.type) and owner is not None \
                and owner.name == "memref.reinterpret_cast":
            self.args.append(value)  # a bare pointer (the 0-d base of a dynamic buffer)
            return True
        if owner is not None and owner.name in _RECREATED and depth < 64:
            if not all(self._take(v, depth + 1) for v in owner.operands):
                return False
            self.recreate.append(owner)
            return True
        if is_identity_static_memref(value.type):
            self.args.append(value)
            return True
        if isinstance(value, ir.BlockArgument) and (
                isinstance(value.type, (ir.IndexType, ir.IntegerType, ir.F64Type))):
            # a size argument of a dynamic-shape graph, or a scalar input (an i64 size
            # computed by the call prologue): one launcher slot each
            self.args.append(value)
            return True
        return False  # e.g. a scalar computed at run time: keep the loop serial


# Set on a module whose entry function writes an output into an input's buffer
# (compiler/in_place_outputs.py): two of its arguments may then be one buffer.
OUTPUTS_ALIAS_INPUTS = "ember.outputs_alias_inputs"


def _buffer_of(value):
    """What `value`'s memory is part of: an argument of the entry function or an
    allocation, or a slot of the workspace argument (the argument and the slot's byte
    offset); None when that is not known."""
    while True:
        owner = defining_op(value)
        if owner is None:
            return value  # an argument of the entry function: a buffer of its own
        if owner.name == "memref.view":  # a workspace slot (ember-plan-workspace)
            base = owner.operands[0]
            if defining_op(base) is not None:
                return None
            offset = _const_index(owner.operands[1])
            return (base, offset if offset is not None else owner.operands[1])
        elif owner.name in VIEW_OPS:
            value = owner.operands[0]
        elif owner.name in ("memref.alloc", "memref.alloca"):
            return value
        else:
            return None


def _disjoint_buffers(args):
    """Whether the kernel's buffer arguments are distinct buffers, so that each can be
    marked `noalias`: LLVM may then keep a loaded weight in a register across stores and
    hoist per-channel values out of inner loops (MobileNetV2's kernels: -22%). Entry
    arguments are distinct tensors (inputs are never written, outputs are fresh buffers);
    workspace slots used by one kernel are disjoint by the workspace plan (both are live
    there), but not the workspace and a slot of it."""
    seen = []
    for v in args:
        if not isinstance(v.type, ir.MemRefType):
            continue
        buffer = _buffer_of(v)
        if buffer is None or buffer in seen:
            return False
        seen.append(buffer)
    slot_bases = [b[0] for b in seen if isinstance(b, tuple)]
    return not any(b in slot_bases for b in seen if not isinstance(b, tuple))


def _outline(entry, loop, plan, name, d, noalias=False):
    i32, index = ir.IntegerType.get_signless(32), ir.IndexType.get()
    arg_types = [i32, i32] + [v.type for v in plan.args]
    with ir.InsertionPoint(entry):
        kernel = func.FuncOp(name, (arg_types, []))
    kernel.attributes["sym_visibility"] = ir.StringAttr.get("private")
    if noalias:
        kernel.arg_attrs = ir.ArrayAttr.get(
            [ir.DictAttr.get({}), ir.DictAttr.get({})] +
            [ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()} if isinstance(t, ir.MemRefType)
                             else {}) for t in arg_types[2:]])
    block = kernel.add_entry_block()
    mapping = {v: block.arguments[2 + i] for i, v in enumerate(plan.args)}
    with ir.InsertionPoint(block):
        # Thread `tid` of `nt` runs iterations [tid*trip/nt, (tid+1)*trip/nt) of dim d.
        ops = list(loop.operands)
        n = len(loop.regions[0].blocks[0].arguments)
        lb, step = _const_index(ops[d]), _const_index(ops[2 * n + d])
        for o in plan.recreate:
            clone_remapped(o, mapping)
        trip = _trip_counts(loop)
        tid = arith.index_cast(index, block.arguments[0])
        nt = arith.index_cast(index, block.arguments[1])
        if trip is not None:
            c_trip = arith.constant(index, trip[d])
        else:  # run-time bound: ceil((ub - lb) / step)
            ub = mapping.get(ops[n + d], ops[n + d])
            span = arith.subi(ub, arith.constant(index, lb))
            c_trip = arith.ceildivui(span, arith.constant(index, step))

        def bound(t):
            first = arith.divui(arith.muli(t, c_trip), nt)
            return arith.addi(arith.constant(index, lb),
                              arith.muli(first, arith.constant(index, step)))

        lo = bound(tid)
        hi = bound(arith.addi(tid, arith.constant(index, 1)))
        ret = func.ReturnOp([])
    # Launch site: the entry function calls the (declared) launcher where the loop was.
    with ir.InsertionPoint(loop):
        call = func.CallOp([], ir.FlatSymbolRefAttr.get(name + LAUNCH_SUFFIX), list(plan.args))
    loop.move_before(ret)
    loop.operands[d] = lo
    loop.operands[n + d] = hi

    def remap(o):
        for i, v in enumerate(o.operands):
            if v in mapping:
                o.operands[i] = mapping[v]
        return ir.WalkResult.ADVANCE

    loop.walk(remap)
    with ir.InsertionPoint(entry):
        launcher = func.FuncOp(name + LAUNCH_SUFFIX, ([v.type for v in plan.args], []))
    launcher.attributes["sym_visibility"] = ir.StringAttr.get("private")
    return kernel, launcher, call


def _structure(kernel, name):
    """The kernel's text with its own name taken out: equal for the kernels of identical
    layers (the same loops over other buffers, which are arguments)."""
    # Local scope: printing in the module's scope walks the whole module each time.
    text = kernel.operation.get_asm(use_local_scope=True, assume_verified=True)
    return text.replace(f"@{name}(", "@kernel(", 1)


class _Deduplicator:
    """A kernel equal in structure to an earlier one is dropped: its launch calls the
    earlier kernel's launcher. A transformer's N identical blocks then cost LLVM one
    block's kernels, not N (GPT-2: 253 kernels, 25 distinct)."""

    def __init__(self):
        self.seen = {}

    def add(self, kernel, launcher, call, name):
        key = _structure(kernel, name)
        if key not in self.seen:
            self.seen[key] = name
            return True
        call.operation.attributes["callee"] = ir.FlatSymbolRefAttr.get(
            self.seen[key] + LAUNCH_SUFFIX)
        kernel.operation.erase()
        launcher.operation.erase()
        return False


def _is_dynamic_identity(t):
    return (isinstance(t, ir.MemRefType) and not t.has_static_shape
            and t.affine_map == ir.AffineMap.get_identity(t.rank))


def _dynamic_sizes(op):
    """Index values of the dynamic sizes of a buffer made by `op` (an alloc: its operands;
    a memref.reshape: loads from its shape operand), None for static dims."""
    t = ir.MemRefType(op.results[0].type)
    if op.name == "memref.alloc":
        dynamic = iter(op.operands)
        return [next(dynamic) if t.is_dynamic_dim(k) else None for k in range(t.rank)]
    shape = op.operands[1]
    index = ir.IndexType.get()
    sizes = []
    for k in range(t.rank):
        if not t.is_dynamic_dim(k):
            sizes.append(None)
            continue
        size = memref.load(shape, [arith.constant(index, k)])
        if not isinstance(size.type, ir.IndexType):
            size = arith.index_cast(index, size)
        sizes.append(size)
    return sizes


def _expose_dynamic_allocs(entry):
    """A temporary with run-time sizes (or a reshape of one) reaches a kernel as a pointer:
    its uses read a view of a 0-d cast of it (a bare pointer), which the outliner
    re-creates inside."""
    from .shape_arguments import reinterpret_as

    ops = [o.operation for o in entry.regions[0].blocks[0].operations]
    for i, alloc in enumerate(ops):
        if alloc.name not in ("memref.alloc", "memref.reshape") \
                or not _is_dynamic_identity(alloc.results[0].type):
            continue
        t = ir.MemRefType(alloc.results[0].type)
        with ir.InsertionPoint(ops[i + 1]), alloc.location:
            sizes = _dynamic_sizes(alloc)
            base = memref.ReinterpretCastOp(ir.MemRefType.get([], t.element_type),
                                            alloc.results[0], [], [], [], [0], [], []).result
            view = reinterpret_as(base, t, sizes)
        keep = {defining_op(base)}
        for use in list(alloc.results[0].uses):
            owner = use.owner
            if owner in keep or owner.name == "memref.dealloc":
                continue
            owner.operands[use.operand_number] = view


def outline_parallel_loops(module_op, pass_=None):
    if not openmp_available():
        return  # a torch built without OpenMP: loops stay serial
    count = 0
    distinct = _Deduplicator()
    arguments_apart = OUTPUTS_ALIAS_INPUTS not in module_op.attributes
    for entry in entry_functions(module_op):
        _expose_dynamic_allocs(entry)
        body = entry.regions[0].blocks[0]
        loops = [o.operation for o in body.operations if o.operation.name == "scf.parallel"]
        for loop in loops:
            counts = _trip_counts(loop, DYNAMIC_TRIP_GUESS)
            if not counts or len(loop.results) or _work(loop) < MIN_PARALLEL_WORK:
                continue
            d = split_dimension(counts)
            if counts[d] < 2:
                continue
            plan = _Outline(loop)
            if not plan.ok:
                continue
            name = f"{KERNEL_PREFIX}{count}"
            noalias = arguments_apart and _disjoint_buffers(plan.args)
            with loop.location:
                outlined = _outline(entry, loop, plan, name, d, noalias)
            if distinct.add(*outlined, name):
                count += 1


_DECLARATIONS = """
llvm.func @GOMP_parallel(!llvm.ptr, !llvm.ptr, i32, i32)
llvm.func @omp_get_thread_num() -> i32
llvm.func @omp_get_num_threads() -> i32
"""


def _launcher_ir(kernel, types):
    """The launcher and trampoline of `kernel`, which takes (tid, nt, *types); each
    argument (a pointer or an i64 size) travels in one pointer-sized slot."""
    num_args = len(types)
    params = ", ".join(f"%a{i}: {ty}" for i, ty in enumerate(types))
    packs, unpacks = [], []
    for i, ty in enumerate(types):
        slot = f"  %s{i} = llvm.getelementptr %ctx[{i}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr\n"
        if ty == "!llvm.ptr":
            packs.append(slot + f"  llvm.store %a{i}, %s{i} : !llvm.ptr, !llvm.ptr")
            unpacks.append(slot + f"  %a{i} = llvm.load %s{i} : !llvm.ptr -> !llvm.ptr")
        else:
            packs.append(slot + f"  llvm.store %a{i}, %s{i} : {ty}, !llvm.ptr")
            unpacks.append(slot + f"  %a{i} = llvm.load %s{i} : !llvm.ptr -> {ty}")
    packs, unpacks = "\n".join(packs), "\n".join(unpacks)
    args = "".join(f", %a{i}" for i in range(num_args))
    sig = "".join(f", {ty}" for ty in types)
    # The kernel's declaration lets the text verify on its own; it is dropped on moving.
    return f"""
llvm.func @{kernel}(i32, i32{sig})
llvm.func internal @{kernel}_omp(%ctx: !llvm.ptr) {{
{unpacks}
  %tid = llvm.call @omp_get_thread_num() : () -> i32
  %nt = llvm.call @omp_get_num_threads() : () -> i32
  llvm.call @{kernel}(%tid, %nt{args}) : (i32, i32{sig}) -> ()
  llvm.return
}}
llvm.func internal @{kernel}{LAUNCH_SUFFIX}({params}) {{
  %n = llvm.mlir.constant({max(num_args, 1)} : i64) : i64
  %ctx = llvm.alloca %n x !llvm.ptr : (i64) -> !llvm.ptr
{packs}
  %fn = llvm.mlir.addressof @{kernel}_omp : !llvm.ptr
  %zero = llvm.mlir.constant(0 : i32) : i32
  llvm.call @GOMP_parallel(%fn, %ctx, %zero, %zero) : (!llvm.ptr, !llvm.ptr, i32, i32) -> ()
  llvm.return
}}
"""


def _param_types(decl):
    """Parameter types of an llvm.func declaration, e.g. ['!llvm.ptr', 'i64']."""
    text = str(ir.TypeAttr(decl.attributes["function_type"]).value)  # !llvm.func<void (ptr, i64)>
    inner = text[text.index("(") + 1:text.rindex(")")]
    return [("!llvm.ptr" if t.strip() == "ptr" else t.strip())
            for t in inner.split(",") if t.strip()]


def emit_parallel_launchers(module_op, pass_=None):
    body = module_op.regions[0].blocks[0]
    declared = [o.operation for o in body.operations
                if o.operation.name == "llvm.func" and symbol_name(o).startswith(KERNEL_PREFIX)
                and symbol_name(o).endswith(LAUNCH_SUFFIX) and not o.regions[0].blocks]
    if not declared:
        return
    text = _DECLARATIONS
    for decl in declared:
        kernel = symbol_name(decl)[:-len(LAUNCH_SUFFIX)]
        text += _launcher_ir(kernel, _param_types(decl))
        decl.erase()
    parsed = ir.Module.parse(text, module_op.context)
    existing = {symbol_name(o) for o in body.operations}
    first = list(body.operations)[0].operation
    for o in list(parsed.body.operations):
        if symbol_name(o) not in existing:
            o.operation.move_before(first)
