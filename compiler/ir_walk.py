"""Collect operations from an IR tree: the one walk every ember pass starts with."""
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


def has_symbol(module_op, name):
    """Whether the module's top level defines or declares symbol `name`."""
    for op in module_op.regions[0].blocks[0].operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return True
    return False
