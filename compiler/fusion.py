"""The target-independent fusion stage and a kernel count for tests and tools."""
from .ir_walk import collect
from ember.dialects.fusion import GROUP_OP_NAME
from .pipeline import run_pipeline

FORM_GROUPS = ["canonicalize", "ember-concat-slices-to-gather", "canonicalize",
               "ember-fold-transpose-into-matmul", "ember-form-fusion-groups"]
# Long sums are split after fusion, so that the split keeps the fused prologue.
LOWER_GROUPS = ["ember-lower-fusion-groups", "ember-merge-elementwise", "canonicalize",
                "ember-split-reductions"]


def count_ops(module, predicate):
    return len(collect(module.operation, predicate))


def count_groups(module):
    return count_ops(module, lambda o: o.name == GROUP_OP_NAME)


def count_kernels(module):
    """Loop nests left after fusion on linalg-on-tensors: one per compute linalg op that
    is not an output initialiser (fill / empty)."""
    return count_ops(module, lambda o: o.name.startswith("linalg.")
                     and o.name not in ("linalg.fill", "linalg.yield", "linalg.index"))


def fuse(module, stats=None):
    run_pipeline(module, FORM_GROUPS, stage="form-fusion-groups")
    if stats is not None:
        stats["groups"] = count_groups(module)
    run_pipeline(module, LOWER_GROUPS, stage="lower-fusion-groups")
    if stats is not None:
        stats["kernels"] = count_kernels(module)
    return module
