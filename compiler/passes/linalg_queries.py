"""Small questions about linalg ops that the fusion passes ask."""
import enum

from torch_mlir import ir


class OpClass(enum.Enum):
    ELEMENTWISE = "elementwise"  # all-parallel linalg op: fusable both ways
    ANCHOR = "anchor"            # matmul / conv / pooling / reduction: one per kernel
    OTHER = "other"              # not a kernel of ours (tensor reshapes, constants, ...)


# Named linalg ops that carry a reduction (contractions, convolutions, pooling).
_ANCHOR_PREFIXES = ("linalg.matmul", "linalg.batch_matmul", "linalg.conv_", "linalg.depthwise_conv",
                    "linalg.pooling_", "linalg.dot", "linalg.matvec", "linalg.vecmat",
                    "linalg.batch_reduce_matmul", "linalg.contract", "linalg.reduce")
_ELEMENTWISE_NAMED = ("linalg.transpose", "linalg.broadcast", "linalg.map", "linalg.copy",
                      "linalg.elementwise", "linalg.add", "linalg.sub", "linalg.mul", "linalg.div")


def iterator_types(op):
    return str(op.attributes["iterator_types"]) if "iterator_types" in op.attributes else ""


def iterator_names(op):
    """['parallel', 'reduction', ...]: the op's iterator kinds, one per loop dim."""
    return [str(a).split("<")[-1].rstrip(">") for a in ir.ArrayAttr(op.attributes["iterator_types"])]


def indexing_maps(op):
    """The op's indexing maps (ir.AffineMap), inputs first, then outputs."""
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def num_inputs(op) -> int:
    """Input operands of a linalg op on tensors (one output operand per result)."""
    return len(op.operands) - len(op.results)


def is_identity_map(m) -> bool:
    return m == ir.AffineMap.get_identity(m.n_dims)


def is_reduction_generic(op) -> bool:
    return op.name == "linalg.generic" and "reduction" in iterator_types(op)


def classify(op) -> OpClass:
    name = op.name
    if name == "linalg.generic":
        return OpClass.ANCHOR if is_reduction_generic(op) else OpClass.ELEMENTWISE
    if name.startswith(_ANCHOR_PREFIXES):
        return OpClass.ANCHOR
    if name in _ELEMENTWISE_NAMED:
        return OpClass.ELEMENTWISE
    return OpClass.OTHER


def _is_tensor(value) -> bool:
    return str(value.type).startswith("tensor<")


def is_clonable_into_group(op) -> bool:
    """Cheap ops a kernel re-creates instead of reading them from outside: tensor.empty,
    scalar constants, and fills of those."""
    if op.name == "tensor.empty":
        return True
    if op.name == "arith.constant":
        return not _is_tensor(op.results[0])
    if op.name == "linalg.fill":
        from ember.compiler.ir_walk import defining_op
        return all(defining_op(v) is not None and is_clonable_into_group(defining_op(v))
                   for v in op.operands)
    return False
