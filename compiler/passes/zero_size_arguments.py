"""ember-zero-size-arguments: an unused argument with a zero-size dim after its first
(tensor<5x0xf32>) becomes tensor<0xf32>.

MLIR's bare-pointer calling convention refuses such a memref (its strides are not the
row-major ones it checks for), and the whole graph failed in the ExecutionEngine: e.g.
`x.new_zeros(3)` of a (5, 0) tensor, where the graph keeps `x` as an input it never reads.
ember's kernels read no zero-size tensor (the ops that do run through ATen,
extern_ops.classify), so such an argument is always unused; the runtime passes its data
pointer either way.

    before: func.func @forward(%arg0: tensor<5x0xf32>, %arg1: tensor<3xf32>) -> ...
    after:  func.func @forward(%arg0: tensor<0xf32>, %arg1: tensor<3xf32>) -> ...
"""
from torch_mlir import ir

from ember.compiler.ir_walk import entry_functions

PASS_NAME = "ember-zero-size-arguments"


def _inner_zero_size(t):
    return (isinstance(t, ir.RankedTensorType) and t.has_static_shape
            and 0 in list(t.shape)[1:])


def flatten_zero_size_arguments(module_op, pass_=None):
    for f in entry_functions(module_op):
        block = f.regions[0].blocks[0]
        changed = False
        for arg in block.arguments:
            if _inner_zero_size(arg.type) and not list(arg.uses):
                with f.location:
                    arg.set_type(ir.RankedTensorType.get([0], arg.type.element_type))
                changed = True
        if changed:
            ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
            f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
                [a.type for a in block.arguments], list(ftype.results)))
