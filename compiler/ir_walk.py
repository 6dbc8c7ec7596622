"""Collect operations from an IR tree (the one walk every ember pass starts with), and the
small attribute/type questions several passes ask."""
from torch_mlir import ir


def collect(root, predicate, *, skip_nested=False):
    """ir.Operation list (post-order) of ops under `root` for which predicate(op) holds;
    with skip_nested, the inside of a matching op is not searched."""
    found = []

    def visit(o):
        if predicate(o):
            found.append(o.operation)
            if skip_nested:
                return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def named(*names):
    return lambda o: o.name in names


def defining_op(value):
    """The ir.Operation defining `value`, or None for a block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def constant_attr(value):
    """The `value` attribute of the arith.constant defining `value`, or None."""
    op = defining_op(value)
    return op.attributes["value"] if op is not None and op.name == "arith.constant" else None


def entry_functions(module_op):
    """The module's public func.func definitions (kernels and helpers ember adds are
    private)."""
    return [o.operation for o in module_op.regions[0].blocks[0].operations
            if o.operation.name == "func.func" and "sym_visibility" not in o.attributes
            and o.regions[0].blocks]


def symbol_name(op):
    """The op's `sym_name`, or None."""
    attrs = op.attributes
    return ir.StringAttr(attrs["sym_name"]).value if "sym_name" in attrs else None


def has_symbol(module_op, name):
    """Whether the module's top level defines or declares symbol `name`."""
    return any(symbol_name(op) == name for op in module_op.regions[0].blocks[0].operations)


def int_array(op, name):
    """An `array<i64: ...>` attribute of `op` as a Python list ([] when empty)."""
    text = str(op.attributes[name])  # 'array<i64: 1, 0>' or 'array<i64>'
    return [int(x) for x in text[text.index(":") + 1:].rstrip(">").split(",")] if ":" in text else []


def is_identity_static_memref(t):
    """A memref type with static shape and identity layout: one bare pointer carries it."""
    return (isinstance(t, ir.MemRefType) and t.has_static_shape
            and t.affine_map == ir.AffineMap.get_identity(t.rank))


def clone_remapped(op, mapping):
    """Clone `op` at the current insertion point, its operands looked up in `mapping`
    (old value -> new), and record its results there."""
    clone = op.clone()
    for i, v in enumerate(clone.operands):
        if v in mapping:
            clone.operands[i] = mapping[v]
    for old, new in zip(op.results, clone.results):
        mapping[old] = new
    return clone
