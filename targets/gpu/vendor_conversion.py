"""ember-gpu-to-nvvm / ember-gpu-to-rocdl: convert each gpu.module to the vendor dialect
with the calling convention its kernel can take.

A kernel whose memref arguments all have static shapes, strides and offsets gets the
bare-pointer convention (one pointer per buffer, to element 0 of the buffer the view's
offset counts from; the conversion bakes the layout into the kernel); others keep MLIR's descriptor
(pointer, pointer, offset, sizes, strides). CUDA allows 4 KiB of kernel parameters: a
merged elementwise kernel over 100 rank-4 buffers took 8.7 KiB as descriptors and ptxas
refused it ("uses too much parameter space").

    gpu.func @k(%a: memref<4x8xf32>, %b: memref<4x8xf32>) kernel
      -> llvm.func @k(%a: !llvm.ptr, %b: !llvm.ptr)                         (bare)
    gpu.func @k(%a: memref<?x5xf32>) kernel
      -> llvm.func @k(!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64)       (descriptor)

The choice is recorded on the gpu.module (`ember.bare_pointers`) for the launch plan.
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, llvm, scf
from torch_mlir.passmanager import PassManager

from ember.compiler.ir_walk import collect, named
from ember.compiler.pipeline import PipelineError

NVVM_PASS_NAME = "ember-gpu-to-nvvm"
ROCDL_PASS_NAME = "ember-gpu-to-rocdl"
BARE_ATTR = "ember.bare_pointers"
ROCM_CHIPSET = "gfx942"

# Before the vendor conversion: `fpowi` (x ** 3) and tanh have no NVVM / ROCDL lowering.
_PREPARE = ("lower-affine,convert-scf-to-cf,"
            "math-expand-ops{ops=ctlz,tan,sinh,cosh,asinh,acosh,atanh,tanh,fpowi,"
            "roundeven,exp2,ceil,round}")
# After it (it sends math to libdevice / ocml), what is left (math.absi, ...) becomes
# LLVM intrinsics.
_FINISH = "convert-math-to-llvm,convert-arith-to-llvm,canonicalize"


def _is_static(value_type):
    """Not a buffer, or one with static sizes, strides and offset (the conversion bakes
    them into the kernel)."""
    try:
        t = ir.MemRefType(value_type)
    except ValueError:
        return True
    return t.has_static_shape and "?" not in str(t.layout)


def _kernel_takes_bare_pointers(gpu_module):
    for op in gpu_module.regions[0].blocks[0].operations:
        if op.operation.name != "gpu.func":
            continue
        for arg in op.regions[0].blocks[0].arguments:
            if not _is_static(arg.type):
                return False
    return True


def _asserts_to_traps(gpu_module):
    """ROCDL has no lowering of cf.assert: a failed check traps the wave, as HIP's
    device-side assert does (the index it guards is clamped already)."""
    i1 = ir.IntegerType.get_signless(1)
    for op in collect(gpu_module, named("cf.assert")):
        with ir.InsertionPoint(op), op.location:
            bad = arith.xori(op.operands[0], arith.ConstantOp(i1, 1).result)
            branch = scf.IfOp(bad)
            with ir.InsertionPoint(branch.then_block):
                llvm.intr_trap()
                scf.YieldOp([])
        op.erase()


def _run(op, pipeline):
    try:
        PassManager.parse(pipeline).run(op)
    except Exception as exc:  # MLIRError: name the kernel, keep MLIR's diagnostics
        name = ir.StringAttr(op.attributes["sym_name"]).value
        raise PipelineError(pipeline.split("(")[0], f"kernel {name}: {exc}") from None


def _convert(module_op, vendor):
    for op in list(module_op.regions[0].blocks[0].operations):
        op = op.operation
        if op.name != "gpu.module":
            continue
        with op.context:
            bare = _kernel_takes_bare_pointers(op)
            option = "{use-bare-ptr-memref-call-conv=1}" if bare else ""
            if vendor == "rocdl":  # chipset-specific lowerings target the default arch
                option = option[:-1] + f" chipset={ROCM_CHIPSET}}}" if option else \
                    f"{{chipset={ROCM_CHIPSET}}}"
            if vendor == "rocdl":
                _asserts_to_traps(op)
            _run(op, f"gpu.module({_PREPARE},convert-gpu-to-{vendor}{option},{_FINISH})")
            op.attributes[BARE_ATTR] = ir.BoolAttr.get(bare)


def convert_to_nvvm(module_op, pass_=None):
    _convert(module_op, "nvvm")


def convert_to_rocdl(module_op, pass_=None):
    _convert(module_op, "rocdl")
