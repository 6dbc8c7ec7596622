"""ember-distinct-results: every memref a public function returns is a distinct buffer of
its own, so that buffer-results-to-out-params can give each result its own out-param.

That upstream pass segfaults on a function that returns one buffer twice (after
bufferization two graph outputs can be the same buffer, e.g. a value and its reshape) or
returns an argument. The second occurrence is copied into a fresh buffer:

    before: return %0, %0 : memref<4xf32>, memref<4xf32>
    after:  %1 = memref.alloc() : memref<4xf32>
            memref.copy %0, %1 : memref<4xf32> to memref<4xf32>
            return %0, %1 : memref<4xf32>, memref<4xf32>
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, memref

from ember.compiler.ir_walk import collect, entry_functions, named

PASS_NAME = "ember-distinct-results"


def _needs_copy(value, seen):
    return value in seen or isinstance(value.owner, ir.Block)


def distinct_results(module_op, pass_=None):
    for func in entry_functions(module_op):
        for ret in collect(func, named("func.return")):
            seen = []
            for i, value in enumerate(list(ret.operands)):
                t = value.type
                if isinstance(t, ir.MemRefType) and _needs_copy(value, seen):
                    with ir.InsertionPoint(ret), ret.location:
                        # dynamic dims: sized like the value (a dynamic-shape graph
                        # returning its input's view, e.g. CLIP's at a second length)
                        sizes = [memref.DimOp(value, arith.ConstantOp(
                            ir.IndexType.get(), d).result).result
                            for d in range(t.rank) if t.is_dynamic_dim(d)]
                        fresh = memref.AllocOp(ir.MemRefType.get(t.shape, t.element_type),
                                               sizes, []).result
                        memref.CopyOp(value, fresh)
                    ret.operands[i] = fresh
                    value = fresh
                seen.append(value)
