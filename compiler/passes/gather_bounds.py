"""ember-check-gather-bounds: a gather's data-dependent index is checked and clamped.

torch-mlir lowers embedding / index_select / gather / x[idx] to a `tensor.extract` at an
index read from a tensor, without a bound check: an index out of range read memory
outside the tensor (garbage, or a segfault) where eager raises "index out of range in
self". Each such index now gets a run-time check (a `cf.assert`: an error code on the CPU,
a device-side assertion on a GPU) and is clamped to 0 when out of range, so that the read
itself stays inside the tensor until the error is raised.

    %i = arith.index_cast %in : i64 to index
    %v = tensor.extract %w[%i, %j] : tensor<10x4xf32>
  ->
    %ok = (%i >= 0) and (%i < 10)
    cf.assert %ok, "index out of range in self (a gather, embedding or indexing)"
    %safe = arith.select %ok, %i, %c0 : index
    %v = tensor.extract %w[%safe, %j] : tensor<10x4xf32>

Indices computed only from loop positions (linalg.index) and constants are left alone.
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, cf, tensor

from ember.compiler.ir_walk import collect, named

PASS_NAME = "ember-check-gather-bounds"
MESSAGE = "index out of range in self (a gather, embedding or indexing op)"


def _data_dependent(value, body, seen=None):
    """Whether `value` depends on the data the generic reads (its block arguments)."""
    seen = seen if seen is not None else set()
    owner = value.owner
    if isinstance(owner, ir.Block):
        return owner == body
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name in ("linalg.index", "arith.constant"):
        return False
    if op.parent is None or op.block != body and not _inside(op, body):
        return False  # computed outside the loop nest
    key = id(op)
    if key in seen:
        return False
    seen.add(key)
    return any(_data_dependent(v, body, seen) for v in op.operands)


def _inside(op, body):
    parent = op.parent
    while parent is not None:
        if parent.regions and any(b == body for r in parent.regions for b in r.blocks):
            return True
        parent = parent.parent
    return False


def check_gather_bounds(module_op, pass_=None):
    for generic in collect(module_op, named("linalg.generic")):
        body = generic.regions[0].blocks[0]
        for extract in collect(generic, named("tensor.extract")):
            source = extract.operands[0]
            indices = list(extract.operands)[1:]
            shape = ir.RankedTensorType(source.type).shape
            for k, index in enumerate(indices):
                if not _data_dependent(index, body):
                    continue
                with ir.InsertionPoint(extract), extract.location:
                    zero = arith.ConstantOp(ir.IndexType.get(), 0).result
                    if shape[k] >= 0:
                        size = arith.ConstantOp(ir.IndexType.get(), shape[k]).result
                    else:
                        size = tensor.dim(source, arith.ConstantOp(ir.IndexType.get(), k))
                    low = arith.cmpi(arith.CmpIPredicate.sge, index, zero)
                    high = arith.cmpi(arith.CmpIPredicate.slt, index, size)
                    ok = arith.andi(low, high)
                    cf.AssertOp(ok, MESSAGE)
                    safe = arith.select(ok, index, zero)
                extract.operands[1 + k] = safe
