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
