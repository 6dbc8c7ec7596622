"""ember-read-only-arguments: the public functions' tensor arguments are the caller's
tensors (a user's input, a saved activation, the gradient autograd hands the backward):
one-shot-bufferize must never write into them.

By default one-shot-bufferize treats function arguments as writable and lets an op whose
result is the argument's last use update it in place: `torch.slice_scatter(x, s, 0, 10,
20)` compiled that way overwrote the user's `x`, and a backward overwrote its incoming
gradient. Marking them read-only makes it copy first where it needs to write:

    before: func.func @forward(%arg0: tensor<20x4xf32>, ...)
    after:  func.func @forward(%arg0: tensor<20x4xf32> {bufferization.writable = false}, ...)

(Mutated inputs that should be updated in place are handled outside the function: the
runtime passes the input's storage as that output's out-param, compiler/in_place_outputs.py.)
"""
from torch_mlir import ir

from ember.compiler.ir_walk import entry_functions
from .shape_import import set_arg_attr

PASS_NAME = "ember-read-only-arguments"


def mark_arguments_read_only(module_op, pass_=None):
    for f in entry_functions(module_op):
        for i, arg in enumerate(f.regions[0].blocks[0].arguments):
            if isinstance(arg.type, ir.RankedTensorType):
                set_arg_attr(f, i, "bufferization.writable", ir.BoolAttr.get(False))
