"""ember-fold-transpose-into-matmul: matmul(transpose(A)?, transpose(B)?) -> matmul with
transposed indexing maps, so neither transpose is materialised. Every nn.Linear has one
on its weight (B) and attention one on K; a backward has one on A in every weight
gradient (`grad.t() @ x`) and in attention's `p.t() @ grad`. The BLAS lowering turns
the maps into trans flags.

    before: %t = linalg.transpose ins(%g : 512x1024) permutation = [1, 0]
            %w = linalg.matmul ins(%t, %x : 1024x512, 512x256)
    after:  %w = linalg.matmul indexing_maps = [(d0, d1, d2) -> (d2, d0), ...]
                 ins(%g, %x : 512x1024, 512x256)
"""
from torch_mlir import ir

from ember.compiler.ir_walk import collect, defining_op, int_array

PASS_NAME = "ember-fold-transpose-into-matmul"

# op name -> (permutation that swaps the two matrix dims, maps of A (plain, transposed),
# of B (plain, transposed), of C)
_RULES = {
    "linalg.matmul": ([1, 0], ("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d0)"),
                      ("(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d1, d2)"),
                      "(d0, d1, d2) -> (d0, d1)"),
    "linalg.batch_matmul": ([0, 2, 1],
                            ("(d0, d1, d2, d3) -> (d0, d1, d3)",
                             "(d0, d1, d2, d3) -> (d0, d3, d1)"),
                            ("(d0, d1, d2, d3) -> (d0, d3, d2)",
                             "(d0, d1, d2, d3) -> (d0, d2, d3)"),
                            "(d0, d1, d2, d3) -> (d0, d1, d2)"),
}


def _swapping_transpose(value, perm):
    """The linalg.transpose producing `value` when it swaps the two matrix dims."""
    producer = defining_op(value)
    if producer is None or producer.name != "linalg.transpose":
        return None
    return producer if int_array(producer, "permutation") == perm else None


def fold_transpose_into_matmul(module_op, pass_=None):
    candidates = collect(module_op, lambda o: o.name in _RULES and not _custom_maps(o))
    for mm in candidates:
        perm, a_maps, b_maps, c_map = _RULES[mm.name]
        transposes = [_swapping_transpose(mm.operands[i], perm) for i in (0, 1)]
        if not any(transposes):
            continue
        maps = [a_maps[transposes[0] is not None], b_maps[transposes[1] is not None], c_map]
        with mm.context:
            mm.attributes["indexing_maps"] = ir.ArrayAttr.get(
                [ir.Attribute.parse(f"affine_map<{m}>") for m in maps])
        for i, producer in enumerate(transposes):
            if producer is None:
                continue
            mm.operands[i] = producer.operands[0]
            if not any(True for _ in producer.results[0].uses):
                producer.erase()


def _custom_maps(op):
    """The matmul's indexing maps when they are not the default ones, else ()."""
    if "indexing_maps" not in op.attributes:
        return ()
    maps = [str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    _perm, a_maps, b_maps, c_map = _RULES[op.name]
    default = [f"affine_map<{m}>" for m in (a_maps[0], b_maps[0], c_map)]
    return () if maps == default else ("indexing_maps",)
