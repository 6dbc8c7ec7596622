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
from torch_mlir.passmanager import PassManager

NVVM_PASS_NAME = "ember-gpu-to-nvvm"
ROCDL_PASS_NAME = "ember-gpu-to-rocdl"
BARE_ATTR = "ember.bare_pointers"

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


def _convert(module_op, vendor):
    for op in list(module_op.regions[0].blocks[0].operations):
        op = op.operation
        if op.name != "gpu.module":
            continue
        with op.context:
            bare = _kernel_takes_bare_pointers(op)
            option = "{use-bare-ptr-memref-call-conv=1}" if bare else ""
            PassManager.parse(f"gpu.module({_PREPARE},convert-gpu-to-{vendor}{option},"
                              f"{_FINISH})").run(op)
            op.attributes[BARE_ATTR] = ir.BoolAttr.get(bare)


def convert_to_nvvm(module_op, pass_=None):
    _convert(module_op, "nvvm")


def convert_to_rocdl(module_op, pass_=None):
    _convert(module_op, "rocdl")
