"""Split a lowered LLVM-dialect module into parts that LLVM compiles at the same time.

LLVM's O3 is most of a cold compile (BART: 4.3 s of 6.2 s), and it works one function at
a time: the outlined kernels of one graph are independent of each other. Each part is
a module of its own that defines some functions and declares the rest; the objects it
yields are linked by the loader (every function has external linkage, so a call into
another part is an ordinary relocation, resolved inside the graph's own MCJIT engine).

    llvm.func @forward(...) { ... call @ember_par_3_launch ... }       part 0
    llvm.func @ember_par_3(...) {...}  @ember_par_3_omp  @ember_par_3_launch
    ->
    part 0: llvm.func @forward(...) {...}   llvm.func @ember_par_3_launch(...)  (declared)
    part 1: llvm.func @ember_par_3 ... @ember_par_3_launch(...) {...}           (defined)

A kernel stays with its trampoline and launcher (so LLVM may still inline them into each
other); the entry function and the helpers it calls stay in part 0. Mutable globals (the
run-time check flag) are defined in part 0 and declared elsewhere; constant globals are
copied into every part that may read them (LLVM drops the unused copies).
"""
from torch_mlir import ir

from ember.compiler.ir_walk import symbol_name
from .parallel import KERNEL_PREFIX, LAUNCH_SUFFIX

# Below this many operations one LLVM run is faster than starting a second one.
MIN_SPLIT_OPS = 6000
# An operation of the entry function costs LLVM about a third of a kernel's (it is mostly
# memref descriptors that fold away; kernels are vectorized): OPT's forward has as many
# operations as all its kernels and compiles in 0.5 s against their 1.6 s.
ENTRY_OP_WEIGHT = 0.3


def _group(name):
    """Functions that belong together: a kernel with its `_omp` trampoline and launcher."""
    if name.startswith(KERNEL_PREFIX):
        return KERNEL_PREFIX + name[len(KERNEL_PREFIX):].split("_")[0]
    return ""  # the entry function and its helpers: part 0


def _size(op):
    count = [0]

    def visit(_):
        count[0] += 1
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return count[0]


def _is_local(op):
    return "linkage" in op.attributes and str(op.attributes["linkage"]) in (
        "#llvm.linkage<internal>", "#llvm.linkage<private>")


def _is_definition(op):
    return op.name == "llvm.func" and len(op.regions[0].blocks) > 0


def _text(op):
    if "sym_visibility" in op.attributes:
        del op.attributes["sym_visibility"]
    if op.name == "llvm.func" and symbol_name(op).endswith(LAUNCH_SUFFIX) and _is_local(op):
        # the entry function (part 0) calls every launcher
        op.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>", op.context)
    return op.get_asm(use_local_scope=True, assume_verified=True)


def _declaration(op):
    """A definition from another part, as a declaration (generic form keeps every
    attribute of the signature)."""
    return (f'"llvm.func"() <{{function_type = {op.attributes["function_type"]}, '
            f'sym_name = "{symbol_name(op)}"}}> ({{\n}}) : () -> ()')


def _is_mutable_global(op):
    return op.name == "llvm.mlir.global" and "constant" not in op.attributes


def _global_declaration(op):
    return (f'llvm.mlir.global external @{symbol_name(op)}() {{addr_space = 0 : i32}} : '
            f'{ir.TypeAttr(op.attributes["global_type"]).value}')


def split_module(module, parts):
    """[(module text, names it defines and exports), ...]: at most `parts` parts of about
    equal size, or one part (the whole module, names None) when it is too small to gain
    from splitting."""
    ops = [o.operation for o in module.body.operations]
    groups, sizes = {}, {}
    for op in ops:
        if _is_definition(op):
            key = _group(symbol_name(op))
            groups.setdefault(key, []).append(op)
            weight = ENTRY_OP_WEIGHT if key == "" else 1.0
            sizes[key] = sizes.get(key, 0) + weight * _size(op)
    total = sum(sizes.values())
    parts = min(parts, len(groups))
    if parts < 2 or total < MIN_SPLIT_OPS:
        return [(str(module), None)]
    # Greedy: the largest groups first, each to the lightest part; part 0 starts with
    # the entry function's group.
    loads = [0] * parts
    owner = {"": 0}
    loads[0] = sizes.get("", 0)
    for key in sorted((k for k in groups if k != ""), key=lambda k: -sizes[k]):
        p = min(range(parts), key=lambda i: loads[i])
        owner[key] = p
        loads[p] += sizes[key]
    texts = [[] for _ in range(parts)]
    defined = [[] for _ in range(parts)]
    for op in ops:
        if _is_definition(op):
            p = owner[_group(symbol_name(op))]
            text = _text(op)
            declaration = _declaration(op)
            if not _is_local(op):
                defined[p].append(symbol_name(op))
            for i in range(parts):
                texts[i].append(text if i == p else declaration)
        elif _is_mutable_global(op):
            text = _text(op)
            texts[0].append(text)
            for i in range(1, parts):
                texts[i].append(_global_declaration(op))
        else:
            text = _text(op)
            for i in range(parts):
                texts[i].append(text)
    return [("module {\n" + "\n".join(t) + "\n}\n", names) for t, names in zip(texts, defined)]
