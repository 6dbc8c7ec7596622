"""ember-fold-transpose-into-matmul: matmul(A, transpose(W)) -> matmul with a transposed
indexing map on W, so the transpose is never materialised (every nn.Linear has one on
its weight; attention has one on K). The BLAS lowering turns the map into a trans flag.
"""
from torch_mlir import ir

from ember.compiler.ir_walk import collect, defining_op, int_array

PASS_NAME = "ember-fold-transpose-into-matmul"

# op name -> (permutation that swaps the two matrix dims, maps with B transposed)
_RULES = {
    "linalg.matmul": ([1, 0], ["(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d1, d2)",
                               "(d0, d1, d2) -> (d0, d1)"]),
    "linalg.batch_matmul": ([0, 2, 1], ["(d0, d1, d2, d3) -> (d0, d1, d3)",
                                        "(d0, d1, d2, d3) -> (d0, d2, d3)",
                                        "(d0, d1, d2, d3) -> (d0, d1, d2)"]),
}


def fold_transpose_into_matmul(module_op, pass_=None):
    candidates = collect(module_op, lambda o: o.name in _RULES and not _custom_maps(o))
    for mm in candidates:
        perm, maps = _RULES[mm.name]
        b = mm.operands[1]
        producer = defining_op(b)
        if producer is None or producer.name != "linalg.transpose":
            continue
        if int_array(producer, "permutation") != perm:
            continue
        with mm.context:
            mm.attributes["indexing_maps"] = ir.ArrayAttr.get(
                [ir.Attribute.parse(f"affine_map<{m}>") for m in maps])
        mm.operands[1] = producer.operands[0]
        if not any(True for _ in producer.results[0].uses):
            producer.erase()


def _custom_maps(op):
    """The matmul's indexing maps when they are not the default ones, else ()."""
    if "indexing_maps" not in op.attributes:
        return ()
    maps = [str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    default = {"linalg.matmul": "affine_map<(d0, d1, d2) -> (d2, d1)>",
               "linalg.batch_matmul": "affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>"}[op.name]
    return () if maps[1] == default else ("indexing_maps",)
