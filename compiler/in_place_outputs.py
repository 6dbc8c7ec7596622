"""Write the new value of a mutated input straight into the input's memory.

AOTAutograd functionalizes `p.add_(u)`: the graph returns the new value of `p` as an
extra output and its runtime copies it back (`p.copy_(new_p)`). For an optimizer step
that is a fresh buffer per parameter and state tensor (page faults on every step) plus
a copy that reads and writes everything again. When the kernel can write the new value
into `p` itself, the runtime hands `p` over as that output's buffer, and AOTAutograd's
`p.copy_(p)` returns at once (same storage, offset, sizes and strides).

That is safe only when nothing reads the old value after it is overwritten. On the
fused tensor IR (one linalg op per loop nest, in execution order) it holds when the
output is computed by one all-parallel `linalg.generic` G writing it element for
element, and every read of the input is in an op before G, or in G itself at the same
element (identity map):

    %new = linalg.generic ins(%p, %u) outs(%e) { addf }   // reads p[i], writes new[i]
    return %new, ...          // output 0 may live in p's memory: nothing reads p after

Not safe: a later kernel reading `%p`, a transposed read of `%p` in G, an output made by
a reshape of G's result (its buffer is not the one G writes).
"""
from torch_mlir import ir

from .ir_walk import collect, defining_op, named, symbol_name
from .passes.linalg_queries import indexing_maps, is_identity_map, is_reduction_generic, num_inputs

# Ops that read no element data of a tensor operand.
_METADATA_ONLY = ("tensor.dim",)


def _writer(value):
    """(G, result index) when `value` is written by an all-parallel generic through an
    identity map, else None."""
    g = defining_op(value)
    if g is None or g.name != "linalg.generic" or is_reduction_generic(g):
        return None
    k = value.result_number
    return (g, k) if is_identity_map(indexing_maps(g)[num_inputs(g) + k]) else None


def _reads_before_or_in_place(value, g, block):
    """Every read of `value` (through view-like ops) is in an op before g, or in g at the
    same element."""
    n_in, maps = num_inputs(g), indexing_maps(g)
    for use in value.uses:
        user = use.owner.operation
        if user.name in _METADATA_ONLY:
            continue
        if user == g:
            if use.operand_number >= n_in or not is_identity_map(maps[use.operand_number]):
                return False
            continue
        if user.block != block or not user.is_before_in_block(g):
            return False
        if not user.name.startswith("linalg."):  # a view: its readers count too
            for r in user.results:
                if isinstance(r.type, ir.RankedTensorType) and \
                        not _reads_before_or_in_place(r, g, block):
                    return False
    return True


def in_place_outputs(module, candidates, entry_name):
    """The (output index, input index) pairs of `candidates` whose output the entry
    function may write into the input's buffer."""
    funcs = [f for f in collect(module.operation, named("func.func"))
             if f.regions[0].blocks and symbol_name(f) == entry_name]
    if not funcs or not candidates:
        return []
    entry = funcs[0]
    block = entry.regions[0].blocks[0]
    ret = next(o.operation for o in block.operations if o.name == "func.return")
    returned = list(ret.operands)
    safe = []
    for k, i in candidates:
        if k >= len(returned) or i >= len(block.arguments):
            continue
        value, arg = returned[k], block.arguments[i]
        if not isinstance(arg.type, ir.RankedTensorType):
            continue
        if value.type != arg.type or not ir.RankedTensorType(arg.type).has_static_shape:
            continue
        if sum(1 for v in returned if v == value) != 1:
            continue
        found = _writer(value)
        if found is not None and _reads_before_or_in_place(arg, found[0], block):
            safe.append((k, i))
    return safe
