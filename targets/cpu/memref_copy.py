"""ember-memref-copy-to-linalg: `memref.copy` -> `linalg.copy`, so copies become loops.

Lowered as is, a copy between non-identity layouts calls `memrefCopy` from MLIR's C
runner library, which the JIT does not have; as linalg it is an ordinary loop nest.
"""
from torch_mlir import ir
from torch_mlir.dialects import linalg

from ember.compiler.ir_walk import collect, named

PASS_NAME = "ember-memref-copy-to-linalg"


def memref_copy_to_linalg(module_op, pass_=None):
    for c in collect(module_op, named("memref.copy")):
        src, dst = c.operands
        with ir.InsertionPoint(c), c.location:
            linalg.copy(src, outs=[dst])
        c.erase()
