"""ember-reassociate-reductions: mark the combiner of each linalg reduction `reassoc`.

LLVM only vectorizes a floating-point reduction loop when it may reorder the sum; eager
PyTorch reduces in vectorized (reordered) chunks too, so results stay within fp32
tolerance of eager while softmax / layer-norm / mean loops get SIMD.
"""
from torch_mlir import ir

from ember.compiler.ir_walk import collect
from ember.compiler.passes.linalg_queries import is_reduction_generic

PASS_NAME = "ember-reassociate-reductions"
_COMBINERS = ("arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf",
              "arith.maxnumf", "arith.minnumf")


def reassociate_reductions(module_op, pass_=None):
    generics = collect(module_op, is_reduction_generic)
    if not generics:
        return
    with module_op.context:
        flags = ir.Attribute.parse("#arith.fastmath<reassoc,contract>")
    for g in generics:
        body = g.regions[0].blocks[0]
        for op in body.operations:
            if op.name in _COMBINERS:
                op.attributes["fastmath"] = flags
