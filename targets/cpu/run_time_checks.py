"""ember-asserts-to-error-code: torch-mlir's run-time checks (`cf.assert`, e.g. gather's
index bound) set an error code that the runtime turns into a Python exception, instead of
aborting the process that runs the kernel.

    before: cf.assert %ok, "index must be smaller than dim size"
    after:  %bad = arith.xori %ok, %true : i1
            scf.if %bad {
              %g = memref.get_global @ember_error_code : memref<i32>
              memref.store %c1_i32, %g[] : memref<i32>      (1 + the message's index)
            }
            memref.global @ember_error_code : memref<i32> = dense<0>      (module level)

The module keeps the messages (attribute `ember.error_messages`); runtime/compiled_graph.py
reads the code after each call, resets it and raises with the message.
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, memref, scf

from ember.compiler.ir_walk import collect
from .runtime_symbols import ERROR_GLOBAL

PASS_NAME = "ember-asserts-to-error-code"
MESSAGES_ATTR = "ember.error_messages"


def error_messages(module_op):
    """The messages by code - 1, or [] when the module has no run-time checks."""
    if MESSAGES_ATTR not in module_op.attributes:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(module_op.attributes[MESSAGES_ATTR])]


def asserts_to_error_code(module_op, pass_=None):
    with module_op.context, ir.Location.unknown():
        _rewrite(module_op)


def _rewrite(module_op):
    asserts = collect(module_op, lambda o: o.name == "cf.assert")
    if not asserts:
        return
    block = module_op.regions[0].blocks[0]
    decl = ir.Module.parse(f"memref.global @{ERROR_GLOBAL} : memref<i32> = dense<0>",
                           context=module_op.context)
    for g in list(decl.body.operations):
        g.move_before(list(block.operations)[0])
    messages = error_messages(module_op)
    i1, i32 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32)
    flag_type = ir.MemRefType.get([], i32)
    for op in asserts:
        message = ir.StringAttr(op.attributes["msg"]).value
        if message not in messages:
            messages.append(message)
        code = messages.index(message) + 1
        with ir.InsertionPoint(op), op.location:
            true = arith.ConstantOp(i1, ir.IntegerAttr.get(i1, 1))
            bad = arith.XOrIOp(op.operands[0], true)
            branch = scf.IfOp(bad)
            with ir.InsertionPoint(branch.then_block):
                flag = memref.GetGlobalOp(flag_type, ERROR_GLOBAL)
                value = arith.ConstantOp(i32, ir.IntegerAttr.get(i32, code))
                memref.StoreOp(value, flag, [])
                scf.YieldOp([])
        op.erase()
    module_op.attributes[MESSAGES_ATTR] = ir.ArrayAttr.get(
        [ir.StringAttr.get(m) for m in messages])
