"""The host function of a GPU-lowered module -> a launch plan: plain data (lists, ints,
strings, numpy arrays) that the user's process turns into a Python program
(launch_plan.py). Built in the codegen worker; nothing here runs a kernel.

    %a = memref.alloc(%n) : memref<?x32xf32>          ("alloc", 5, "f32", [("slot", 4), 32])
    gpu.launch_func @k::@k blocks in (%g, 1, 1) ...   ("launch", "k", [grid], [block], [args],
                                                       bare pointers?)
    call @ember_gpu_contract_0(%x, %w, %a) {einsum}   ("einsum", "ab,cb->ac", [x, w, a])
    %v = memref.reinterpret_cast %base to ...         ("view", 7, 6, offset, sizes, strides)
    return %a                                         ("return", [5])

Every SSA value is a numbered slot. An operand that is a compile-time constant is written
as the int itself; ("slot", k) reads slot k at run time. Any host op that would touch
device memory from the CPU (a load, a store, a sequential loop left by a lowering) is
refused with HostPlanError naming it: the graph then runs through ATen.
"""
import numpy as np
from torch_mlir import ir

from .contractions import CALL_PREFIX, EINSUM_ATTR
from .vendor_conversion import BARE_ATTR

_DYNAMIC = -9223372036854775808  # ShapedType.get_dynamic_size()


class HostPlanError(ValueError):
    """The host function holds an op the launch plan cannot run."""


_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
           "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "i1": "bool",
           "ui8": "uint8", "index": "int64"}

# Scalar host arithmetic (sizes, grid dimensions): op name -> the plan's operator name.
_ARITH = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul",
          "arith.divui": "floordiv", "arith.divsi": "truncdiv", "arith.floordivsi": "floordiv",
          "arith.ceildivui": "ceildiv", "arith.ceildivsi": "ceildiv", "arith.remui": "mod",
          "arith.remsi": "truncmod", "arith.minsi": "min", "arith.minui": "min",
          "arith.maxsi": "max", "arith.maxui": "max", "arith.index_cast": "id",
          "arith.index_castui": "id", "arith.extsi": "id", "arith.extui": "id",
          "arith.trunci": "id", "arith.select": "select", "arith.cmpi": "cmpi",
          "arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div",
          "arith.sitofp": "float", "arith.fptosi": "int", "arith.negf": "neg",
          "arith.andi": "and", "arith.ori": "or", "arith.xori": "xor"}
_CMPI = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]


def element_dtype(memref_type):
    name = str(ir.MemRefType(memref_type).element_type)
    if name not in _DTYPES:
        raise HostPlanError(f"buffers of element type {name} have no torch dtype")
    return _DTYPES[name]


def _constant_value(attr):
    if isinstance(attr, ir.BoolAttr) or str(attr.type) == "i1":
        return bool(ir.IntegerAttr(attr).value)
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    raise HostPlanError(f"host constant {attr} is not a scalar")


def _array(attr):
    text = str(attr)
    return [int(x) for x in text[text.index(":") + 1:].rstrip(">").split(",")] if ":" in text else []


def _global_array(global_op):
    attr = global_op.attributes["initial_value"]
    dtype = element_dtype(global_op.attributes["type"].value)
    shape = list(ir.MemRefType(global_op.attributes["type"].value).shape)
    dense = ir.DenseElementsAttr(attr)
    if dense.is_splat:
        value = _constant_value(dense.get_splat_value())
        return np.full(shape, value, dtype=np.float32 if dtype == "bfloat16" else dtype)
    return np.array(dense).reshape(shape)


class _Builder:
    def __init__(self, module_op):
        self.steps, self.slots = [], {}
        self.globals, self.bare_pointers = {}, {}
        for op in module_op.regions[0].blocks[0].operations:
            if op.operation.name == "gpu.module":
                name = ir.StringAttr(op.attributes["sym_name"]).value
                self.bare_pointers[name] = (BARE_ATTR in op.attributes and
                                            ir.BoolAttr(op.attributes[BARE_ATTR]).value)
            if op.operation.name == "memref.global":
                name = ir.StringAttr(op.attributes["sym_name"]).value
                self.globals[name] = op.operation

    def slot(self, value):
        key = value
        if key not in self.slots:
            self.slots[key] = len(self.slots)
        return self.slots[key]

    def ref(self, value):
        """A constant int/float/bool, or ('slot', k)."""
        owner = value.owner
        if not isinstance(owner, ir.Block) and owner.name == "arith.constant":
            try:
                return _constant_value(owner.attributes["value"])
            except HostPlanError:
                pass
        return ("slot", self.slot(value))

    def mixed(self, static, dynamic_operands):
        dynamic = iter(dynamic_operands)
        return [self.ref(next(dynamic)) if s == _DYNAMIC else s for s in static]


def build_host_plan(module_op, entry):
    """(arguments: the entry's argument slots, steps) for function `entry`."""
    b = _Builder(module_op)
    fn = next(o for o in module_op.regions[0].blocks[0].operations
              if o.operation.name == "func.func"
              and ir.StringAttr(o.attributes["sym_name"]).value == entry)
    block = fn.regions[0].blocks[0]
    arguments = [b.slot(a) for a in block.arguments]
    for op in block.operations:
        op = op.operation
        name = op.name
        if name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(attr, ir.DenseElementsAttr) or "dense" in str(attr):
                raise HostPlanError(f"{op.location}: a tensor constant left in the host function")
            b.steps.append(("const", b.slot(op.result), _constant_value(attr)))
        elif name in _ARITH:
            extra = _CMPI[ir.IntegerAttr(op.attributes["predicate"]).value] \
                if name == "arith.cmpi" else None
            b.steps.append(("arith", b.slot(op.result), _ARITH[name],
                            [b.ref(v) for v in op.operands], extra))
        elif name in ("memref.alloc", "memref.alloca") and _is_host_array(op):
            t = ir.MemRefType(op.result.type)
            b.steps.append(("host_array", b.slot(op.result), t.shape[0]))
        elif name == "memref.store" and _is_host_array(op.operands[1].owner):
            b.steps.append(("store", b.ref(op.operands[0]), b.ref(op.operands[1]),
                            b.ref(op.operands[2])))
        elif name == "memref.load" and _is_host_array(op.operands[0].owner):
            b.steps.append(("load", b.slot(op.result), b.ref(op.operands[0]),
                            b.ref(op.operands[1])))
        elif name == "memref.reshape":
            b.steps.append(("reshape", b.slot(op.result), b.ref(op.operands[0]),
                            b.ref(op.operands[1])))
        elif name == "memref.alloc" or name == "memref.alloca":
            t = ir.MemRefType(op.result.type)
            if "strided" in str(t.layout):
                raise HostPlanError(f"{op.location}: an allocation with a strided layout")
            b.steps.append(("alloc", b.slot(op.result), element_dtype(t),
                            b.mixed(list(t.shape), op.operands)))
        elif name == "memref.get_global":
            g = ir.FlatSymbolRefAttr(op.attributes["name"]).value
            b.steps.append(("global", b.slot(op.result), _global_array(b.globals[g])))
        elif name == "memref.dim":
            b.steps.append(("dim", b.slot(op.result), b.ref(op.operands[0]),
                            b.ref(op.operands[1])))
        elif name == "memref.extract_strided_metadata":
            rank = (len(op.results) - 2) // 2
            b.steps.append(("metadata", [b.slot(r) for r in op.results],
                            b.ref(op.operands[0]), rank))
        elif name == "memref.reinterpret_cast":
            operands = list(op.operands)
            offsets, sizes, strides = (_array(op.attributes[k]) for k in
                                       ("static_offsets", "static_sizes", "static_strides"))
            dynamic = operands[1:]
            n_off = sum(1 for s in offsets if s == _DYNAMIC)
            n_size = sum(1 for s in sizes if s == _DYNAMIC)
            b.steps.append(("view", b.slot(op.result), b.ref(operands[0]),
                            b.mixed(offsets, dynamic[:n_off])[0],
                            b.mixed(sizes, dynamic[n_off:n_off + n_size]),
                            b.mixed(strides, dynamic[n_off + n_size:])))
        elif name in ("memref.cast", "memref.assume_alignment"):
            b.steps.append(("alias", b.slot(op.result), b.ref(op.operands[0])))
        elif name == "ember_shape.symbol":  # a size symbol: the call's ShapeProgram value
            b.steps.append(("symbol", b.slot(op.result),
                            ir.StringAttr(op.attributes["name"]).value))
        elif name == "cf.assert":
            b.steps.append(("assert", b.ref(op.operands[0]),
                            ir.StringAttr(op.attributes["msg"]).value))
        elif name in ("memref.dealloc", "ember_shape.bind"):
            continue  # torch frees a dropped buffer; a bind states a fact
        elif name == "gpu.launch_func":
            b.steps.append(_launch(b, op))
        elif name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if not callee.startswith(CALL_PREFIX):
                raise HostPlanError(f"{op.location}: host call of @{callee}")
            b.steps.append(("einsum", ir.StringAttr(op.attributes[EINSUM_ATTR]).value,
                            [b.ref(v) for v in op.operands]))
        elif name == "func.return":
            b.steps.append(("return", [b.ref(v) for v in op.operands]))
        else:
            raise HostPlanError(f"'{name}' would run on the host over device "
                                "memory (no GPU kernel was formed for it)")
    return arguments, b.steps


def _is_host_array(op):
    """A small static 1-d buffer that only host code touches (the shape operand of a
    dynamic reshape, filled by stores): a Python list, never device memory."""
    if isinstance(op, ir.Block) or op.name not in ("memref.alloc", "memref.alloca"):
        return False
    t = ir.MemRefType(op.result.type)
    if t.rank != 1 or not t.has_static_shape or str(t.element_type) not in ("i64", "i32",
                                                                            "index"):
        return False
    for use in op.result.uses:
        owner = use.owner
        if owner.name == "memref.reshape" and use.operand_number == 1:
            continue
        if owner.name in ("memref.store", "memref.load") and (
                owner.name == "memref.load" or use.operand_number == 1):
            continue
        return False
    return True


def _launch(b, op):
    sizes = _array(op.attributes["operandSegmentSizes"])
    # asyncDependencies, grid xyz, block xyz, cluster xyz, dynamicSharedMemorySize,
    # kernelOperands, asyncObject
    operands = list(op.operands)
    at = sizes[0]
    grid = [b.ref(v) for v in operands[at:at + 3]]
    block = [b.ref(v) for v in operands[at + 3:at + 6]]
    at += 6 + sizes[7] + sizes[8] + sizes[9] + sizes[10]
    args = operands[at:at + sizes[11]]
    kernel = str(op.attributes["kernel"])  # @module::@function
    module_name = kernel.split("::")[0].lstrip("@")
    packed = []
    for v in args:
        if isinstance(v.type, ir.MemRefType):
            packed.append(("memref", b.ref(v), ir.MemRefType(v.type).rank))
        else:
            packed.append(("scalar", b.ref(v), str(v.type)))
    bare = b.bare_pointers.get(module_name, False)
    return ("launch", module_name, grid, block, packed, bare)
