"""ember-matmul-to-blas: on memrefs, turn f32 `linalg.matmul` / `linalg.batch_matmul` into a
call of the host BLAS (`sgemm_`, the MKL that ships inside libtorch_cpu).

Like TorchInductor's extern kernels: GEMM is the one op where a tuned library beats any
loop nest we could emit, and the epilogue kernel next to it is still ours. A matmul whose
operands are not unit-stride in their last dimension is left to the loop lowering.

The call goes through `@ember_sgemm`, a helper added to the module once: it calls the
column-major Fortran routine with row-major operands swapped (C^T = B^T A^T), so no copy
is needed; a batch goes to MKL's `sgemm_batch_` as arrays of pointers.
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, func, memref

from ember.compiler.ir_walk import collect, constant_attr, has_symbol, named
from .runtime_symbols import BATCH_SYMBOL, BLAS_SYMBOL, address

PASS_NAME = "ember-matmul-to-blas"
HELPER = "ember_sgemm"

# The helper's body: one `sgemm_` per batch element, or where MKL's `sgemm_batch_` is
# there, batches of up to _CHUNK elements in one call (one group: same sizes and
# transposes), which MKL spreads over its threads by element, as ATen's bmm does: the
# loop of small GEMMs each split over the threads ran attention's bmm at 0.74x eager.
_CHUNK = 256
_HELPER_HEAD = """
llvm.func @sgemm_(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr,
                  !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
func.func private @ember_sgemm(%batch: index, %m: index, %n: index, %k: index,
    %pa: index, %sa: index, %lda: index, %ta: i8,
    %pb: index, %sb: index, %ldb: index, %tb: i8,
    %pc: index, %sc: index, %ldc: index, %beta: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = llvm.mlir.constant(1 : i32) : i32
  %alpha = arith.constant 1.0 : f32
  %p_m = llvm.alloca %one x i32 : (i32) -> !llvm.ptr
  %p_n = llvm.alloca %one x i32 : (i32) -> !llvm.ptr
  %p_k = llvm.alloca %one x i32 : (i32) -> !llvm.ptr
  %p_lda = llvm.alloca %one x i32 : (i32) -> !llvm.ptr
  %p_ldb = llvm.alloca %one x i32 : (i32) -> !llvm.ptr
  %p_ldc = llvm.alloca %one x i32 : (i32) -> !llvm.ptr
  %p_alpha = llvm.alloca %one x f32 : (i32) -> !llvm.ptr
  %p_beta = llvm.alloca %one x f32 : (i32) -> !llvm.ptr
  %p_ta = llvm.alloca %one x i8 : (i32) -> !llvm.ptr
  %p_tb = llvm.alloca %one x i8 : (i32) -> !llvm.ptr
  %m32 = arith.index_cast %m : index to i32
  %n32 = arith.index_cast %n : index to i32
  %k32 = arith.index_cast %k : index to i32
  %lda32 = arith.index_cast %lda : index to i32
  %ldb32 = arith.index_cast %ldb : index to i32
  %ldc32 = arith.index_cast %ldc : index to i32
  llvm.store %m32, %p_m : i32, !llvm.ptr
  llvm.store %n32, %p_n : i32, !llvm.ptr
  llvm.store %k32, %p_k : i32, !llvm.ptr
  llvm.store %lda32, %p_lda : i32, !llvm.ptr
  llvm.store %ldb32, %p_ldb : i32, !llvm.ptr
  llvm.store %ldc32, %p_ldc : i32, !llvm.ptr
  llvm.store %alpha, %p_alpha : f32, !llvm.ptr
  llvm.store %beta, %p_beta : f32, !llvm.ptr
  llvm.store %ta, %p_ta : i8, !llvm.ptr
  llvm.store %tb, %p_tb : i8, !llvm.ptr
"""
# The operands of batch element %b (A, B, C as pointers %A, %B, %C).
_ELEMENT_POINTERS = """
    %ea = arith.muli %b, %sa : index
    %eb = arith.muli %b, %sb : index
    %ec = arith.muli %b, %sc : index
    %ba = arith.muli %ea, %c4 : index
    %bb = arith.muli %eb, %c4 : index
    %bc = arith.muli %ec, %c4 : index
    %aa = arith.addi %pa, %ba : index
    %ab = arith.addi %pb, %bb : index
    %ac = arith.addi %pc, %bc : index
    %ia = arith.index_cast %aa : index to i64
    %ib = arith.index_cast %ab : index to i64
    %ic = arith.index_cast %ac : index to i64
    %A = llvm.inttoptr %ia : i64 to !llvm.ptr
    %B = llvm.inttoptr %ib : i64 to !llvm.ptr
    %C = llvm.inttoptr %ic : i64 to !llvm.ptr
"""
_SGEMM_TYPES = ", ".join(["!llvm.ptr"] * 13)
_LOOP_OF_CALLS = """
  scf.for %b = %c0 to %batch step %c1 {""" + _ELEMENT_POINTERS + """
    llvm.call @sgemm_(%p_tb, %p_ta, %p_n, %p_m, %p_k, %p_alpha, %B, %p_ldb, %A, %p_lda,
                      %p_beta, %C, %p_ldc) : (""" + _SGEMM_TYPES + """) -> ()
  }
"""
_BATCHED_CALLS = """
  %cap = llvm.mlir.constant(""" + str(_CHUNK) + """ : i32) : i32
  %chunk = arith.constant """ + str(_CHUNK) + """ : index
  %arr_a = llvm.alloca %cap x !llvm.ptr : (i32) -> !llvm.ptr
  %arr_b = llvm.alloca %cap x !llvm.ptr : (i32) -> !llvm.ptr
  %arr_c = llvm.alloca %cap x !llvm.ptr : (i32) -> !llvm.ptr
  %p_groups = llvm.alloca %one x i32 : (i32) -> !llvm.ptr
  %p_size = llvm.alloca %one x i32 : (i32) -> !llvm.ptr
  llvm.store %one, %p_groups : i32, !llvm.ptr
  %batched = arith.cmpi sgt, %batch, %c1 : index
  scf.if %batched {
    scf.for %start = %c0 to %batch step %chunk {
      %rest = arith.subi %batch, %start : index
      %count = arith.minsi %rest, %chunk : index
      scf.for %j = %c0 to %count step %c1 {
        %b = arith.addi %start, %j : index""" + _ELEMENT_POINTERS + """
        %j64 = arith.index_cast %j : index to i64
        %slot_a = llvm.getelementptr %arr_a[%j64] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
        %slot_b = llvm.getelementptr %arr_b[%j64] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
        %slot_c = llvm.getelementptr %arr_c[%j64] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
        llvm.store %A, %slot_a : !llvm.ptr, !llvm.ptr
        llvm.store %B, %slot_b : !llvm.ptr, !llvm.ptr
        llvm.store %C, %slot_c : !llvm.ptr, !llvm.ptr
      }
      %count32 = arith.index_cast %count : index to i32
      llvm.store %count32, %p_size : i32, !llvm.ptr
      llvm.call @sgemm_batch_(%p_tb, %p_ta, %p_n, %p_m, %p_k, %p_alpha, %arr_b, %p_ldb,
                              %arr_a, %p_lda, %p_beta, %arr_c, %p_ldc, %p_groups, %p_size)
          : (""" + ", ".join(["!llvm.ptr"] * 15) + """) -> ()
    }
  } else {""" + _LOOP_OF_CALLS.replace("\n  }\n", "\n  }") + """
  }
"""


def _helper_ir(batched):
    declare = ("llvm.func @sgemm_batch_(" + ", ".join(["!llvm.ptr"] * 15) + ")\n"
               if batched else "")
    body = _BATCHED_CALLS if batched else _LOOP_OF_CALLS
    return declare + _HELPER_HEAD + body + "  return\n}\n"

_NO_TRANS, _TRANS = ord("N"), ord("T")


def _is_unit_inner(value):
    strides, _ = ir.MemRefType(value.type).get_strides_and_offset()
    return strides[-1] == 1


def _matmul_operands(op):
    """(A, B, C, transA, transB, batched) for a supported op, else None."""
    name = op.name
    if name not in ("linalg.matmul", "linalg.batch_matmul"):
        return None
    a, b, c = list(op.operands)[:3]
    if any(not str(v.type).startswith("memref<") for v in (a, b, c)):
        return None
    if any(ir.MemRefType(v.type).element_type != ir.F32Type.get() for v in (a, b, c)):
        return None
    trans_a = trans_b = False
    if "indexing_maps" in op.attributes:
        maps = [str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
        batched = name == "linalg.batch_matmul"
        dims = "(d0, d1, d2, d3)" if batched else "(d0, d1, d2)"
        std_b = "(d0, d3, d2)" if batched else "(d2, d1)"
        tr_b = "(d0, d2, d3)" if batched else "(d1, d2)"
        std_a = "(d0, d1, d3)" if batched else "(d0, d2)"
        tr_a = "(d0, d3, d1)" if batched else "(d2, d0)"
        if dims not in maps[0]:
            return None
        if maps[0].endswith(tr_a + ">"):
            trans_a = True
        elif not maps[0].endswith(std_a + ">"):
            return None
        if maps[1].endswith(tr_b + ">"):
            trans_b = True
        elif not maps[1].endswith(std_b + ">"):
            return None
    if not all(_is_unit_inner(v) for v in (a, b, c)):
        return None
    return a, b, c, trans_a, trans_b, name == "linalg.batch_matmul"


# Ops between a fill and its matmul that touch no memory.
_NO_MEMORY_EFFECT = ("arith.constant", "memref.view", "memref.subview", "memref.expand_shape",
                     "memref.collapse_shape", "memref.reinterpret_cast", "memref.cast",
                     "memref.extract_strided_metadata", "memref.extract_aligned_pointer_as_index")


def _is_zero_constant(value):
    attr = constant_attr(value)
    return isinstance(attr, ir.FloatAttr) and attr.value == 0.0


def _zero_fill_of(op, c):
    """The `linalg.fill 0.0` of exactly `c` that this matmul follows with nothing else
    touching memory in between, or None. Such a fill is dropped for beta = 0."""
    block_ops = [o.operation for o in op.operation.block.operations]
    here = next(i for i, o in enumerate(block_ops) if o == op.operation)
    for prev in reversed(block_ops[:here]):
        if prev.name == "linalg.fill":
            fill_value, target = prev.operands[0], prev.operands[1]
            return prev if target == c and _is_zero_constant(fill_value) else None
        if prev.name not in _NO_MEMORY_EFFECT:
            return None
    return None


def _ensure_helper(module_op):
    if has_symbol(module_op, HELPER):
        return
    body = module_op.regions[0].blocks[0]
    helper = ir.Module.parse(_helper_ir(address(BATCH_SYMBOL) is not None),
                            module_op.context)
    first = list(body.operations)[0].operation
    for o in list(helper.body.operations):
        o.operation.move_before(first)


def _emit_call(op, a, b, c, trans_a, trans_b, batched):
    index = ir.IndexType.get()
    i8 = ir.IntegerType.get_signless(8)
    fill = _zero_fill_of(op, c)  # before the call's own ops are inserted above `op`
    with ir.InsertionPoint(op), op.location:
        def meta(v):
            t = ir.MemRefType(v.type)
            rank = t.rank
            md = memref.ExtractStridedMetadataOp(v)
            offset = md.results[1]
            sizes = list(md.results[2:2 + rank])
            strides = list(md.results[2 + rank:2 + 2 * rank])
            ptr = memref.ExtractAlignedPointerAsIndexOp(v).result
            four = arith.ConstantOp(index, 4).result
            addr = arith.AddIOp(ptr, arith.MulIOp(offset, four).result).result
            return addr, sizes, strides

        pa, sa_sizes, sa_strides = meta(a)
        pb, sb_sizes, sb_strides = meta(b)
        pc, sc_sizes, sc_strides = meta(c)
        m, n = sc_sizes[-2], sc_sizes[-1]
        k = sa_sizes[-2] if trans_a else sa_sizes[-1]
        one = arith.ConstantOp(index, 1).result
        zero = arith.ConstantOp(index, 0).result
        batch = sc_sizes[0] if batched else one

        def bstride(strides):
            return strides[0] if batched else zero

        beta = arith.ConstantOp(ir.F32Type.get(), 0.0 if fill is not None else 1.0).result
        args = [batch, m, n, k,
                pa, bstride(sa_strides), sa_strides[-2],
                arith.ConstantOp(i8, _TRANS if trans_a else _NO_TRANS).result,
                pb, bstride(sb_strides), sb_strides[-2],
                arith.ConstantOp(i8, _TRANS if trans_b else _NO_TRANS).result,
                pc, bstride(sc_strides), sc_strides[-2], beta]
        func.CallOp([], ir.FlatSymbolRefAttr.get(HELPER), args)
    op.erase()
    if fill is not None:
        fill.erase()  # C = A B outright (beta 0): no zeroing pass over C


def matmul_to_blas(module_op, pass_=None):
    if address(BLAS_SYMBOL) is None:
        return  # no MKL in this torch build: matmuls stay loop nests
    found = collect(module_op, named("linalg.matmul", "linalg.batch_matmul"))
    rewrites = [(o, _matmul_operands(o)) for o in found]
    rewrites = [(o, r) for o, r in rewrites if r is not None]
    if not rewrites:
        return
    _ensure_helper(module_op)
    for o, r in rewrites:
        _emit_call(o, *r)
