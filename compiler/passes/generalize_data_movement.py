"""ember-generalize-data-movement: tensor `linalg.transpose` / `linalg.broadcast` /
`linalg.copy` -> the equivalent `linalg.generic`.

The fusion groups count these as elementwise, but linalg's elementwise fusion only
fuses generics: left named, a permute between a GEMM and its epilogue (every conv's
NCHW restore, attention's head permutes) would stay a loop nest of its own.
"""
from torch_mlir import ir
from torch_mlir.dialects import linalg

from ember.compiler.ir_walk import collect, int_array, named

PASS_NAME = "ember-generalize-data-movement"


def _input_map(op, rank):
    """Indexing map of the input, over the output's iteration space."""
    d = [f"d{i}" for i in range(rank)]
    if op.name == "linalg.transpose":
        perm = int_array(op, "permutation")  # output dim i = input dim perm[i]
        inverse = [perm.index(m) for m in range(rank)]
        results = [d[i] for i in inverse]
    elif op.name == "linalg.broadcast":
        added = set(int_array(op, "dimensions"))
        results = [d[i] for i in range(rank) if i not in added]
    else:  # linalg.copy
        results = d
    return ir.Attribute.parse(f"affine_map<({', '.join(d)}) -> ({', '.join(results)})>")


def generalize_data_movement(module_op, pass_=None):
    ops = collect(module_op, named("linalg.transpose", "linalg.broadcast", "linalg.copy"))
    for op in ops:
        if len(op.results) != 1:
            continue  # memref form: nothing to fuse with
        src, dst = op.operands[0], op.operands[1]
        out_type = ir.RankedTensorType(op.results[0].type)
        rank = out_type.rank
        with ir.InsertionPoint(op), op.location:
            identity = ir.Attribute.parse(
                f"affine_map<({', '.join(f'd{i}' for i in range(rank))}) -> "
                f"({', '.join(f'd{i}' for i in range(rank))})>")
            parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
            generic = linalg.GenericOp([out_type], [src], [dst],
                                       ir.ArrayAttr.get([_input_map(op, rank), identity]),
                                       ir.ArrayAttr.get([parallel] * rank))
            elem = out_type.element_type
            block = generic.regions[0].blocks.append(
                ir.RankedTensorType(src.type).element_type, elem)
            with ir.InsertionPoint(block):
                linalg.YieldOp([block.arguments[0]])
        op.results[0].replace_all_uses_with(generic.results[0])
        op.erase()
