"""ember-gpu-contractions-to-calls: on memrefs, a generalized contraction
(`C[...] += A[...] * B[...]`, what linalg.matmul / batch_matmul / their transposed forms
become after linalg-generalize-named-ops) -> a call that the host plan runs through the
vendor BLAS that torch links (cuBLAS / hipBLAS, via torch.einsum), like inductor's
extern kernels; every other linalg op becomes an ember kernel.

    linalg.generic {maps = [(m,n,k)->(m,k), (m,n,k)->(n,k), (m,n,k)->(m,n)],
                    iterators = [par, par, red]} ins(%A, %B) outs(%C) { C + A * B }
  ->
    func.call @ember_gpu_contract_0(%A, %B, %C) {ember.einsum = "ac,bc->ab"}

The callee is declared private and never defined: the host plan (host_plan.py) reads the
equation from the call and accumulates into %C, which the generic's init (a fill kernel)
already holds.
"""
import string

from torch_mlir import ir
from torch_mlir.dialects import func

from ember.compiler.ir_walk import collect, named

PASS_NAME = "ember-gpu-contractions-to-calls"
CALL_PREFIX = "ember_gpu_contract_"
EINSUM_ATTR = "ember.einsum"


def _dims(map_attr):
    """The loop dims of a projected-permutation map, or None for any other map."""
    text = str(map_attr)  # affine_map<(d0, d1, d2) -> (d0, d2)>
    results = text[text.index("->") + 2:].strip().rstrip(">").strip()[1:-1]
    dims = [r.strip() for r in results.split(",")] if results.strip() else []
    if any(not (d.startswith("d") and d[1:].isdigit()) for d in dims):
        return None
    dims = [int(d[1:]) for d in dims]
    return dims if len(set(dims)) == len(dims) else None


def _is_multiply_accumulate(generic):
    body = generic.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    if [o.name for o in ops] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return False
    mul, add, _ = ops
    a, b, out = list(body.arguments)
    return (set(mul.operands) == {a, b} and set(add.operands) == {mul.result, out}
            and ops[2].operands[0] == add.result)


def einsum_of(generic):
    """The einsum equation of a multiply-accumulate generic on f32 memrefs, or None."""
    if generic.name != "linalg.generic" or len(generic.operands) != 3:
        return None
    if any(not isinstance(v.type, ir.MemRefType) or str(ir.MemRefType(v.type).element_type)
           != "f32" for v in generic.operands):
        return None
    iterators = [str(a) for a in ir.ArrayAttr(generic.attributes["iterator_types"])]
    if not any("reduction" in i for i in iterators) or not _is_multiply_accumulate(generic):
        return None
    maps = [_dims(m.value) for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    if any(m is None for m in maps) or any("reduction" in iterators[d] for d in maps[2]):
        return None
    if len(iterators) > len(string.ascii_lowercase):
        return None
    letters = lambda dims: "".join(string.ascii_lowercase[d] for d in dims)  # noqa: E731
    return f"{letters(maps[0])},{letters(maps[1])}->{letters(maps[2])}"


def contractions_to_calls(module_op, pass_=None):
    top = module_op.regions[0].blocks[0]
    count = 0
    for generic in collect(module_op, named("linalg.generic")):
        equation = einsum_of(generic)
        if equation is None:
            continue
        name = f"{CALL_PREFIX}{count}"
        count += 1
        types = [v.type for v in generic.operands]
        with ir.InsertionPoint.at_block_begin(top), generic.location:
            func.FuncOp(name, ir.FunctionType.get(types, []), visibility="private")
        with ir.InsertionPoint(generic), generic.location:
            call = func.CallOp([], ir.FlatSymbolRefAttr.get(name), list(generic.operands))
            call.operation.attributes[EINSUM_ATTR] = ir.StringAttr.get(equation)
        generic.erase()
