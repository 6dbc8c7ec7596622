"""ember-stable-sort: torch-mlir has no `aten.sort.stable`; ember's sort lowering
(ember-lower-tm-tensor) is a stable merge sort, so the stable variant is the plain op:

    before: %v, %i = torch.operator "torch.aten.sort.stable"(%x, %stable, %dim, %desc)
    after:  %v, %i = torch.aten.sort %x, %dim, %desc

(torch dialect, before torch-mlir's pipelines; the FX graph keeps sort.stable, so a
graph that runs through ATen keeps eager's stable semantics too).
"""
from torch_mlir import ir

from ember.compiler.ir_walk import collect

PASS_NAME = "ember-stable-sort"


def _is_stable_sort(op):
    return (op.name == "torch.operator"
            and ir.StringAttr(op.attributes["name"]).value == "torch.aten.sort.stable"
            and len(op.operands) == 4)


def stable_sort(module_op, pass_=None):
    for op in collect(module_op, _is_stable_sort):
        x, _, dim, descending = op.operands
        with ir.InsertionPoint(op), op.location:
            plain = ir.Operation.create("torch.aten.sort", results=[r.type for r in op.results],
                                        operands=[x, dim, descending])
        for old, new in zip(op.results, plain.results):
            old.replace_all_uses_with(new)
        op.erase()
