"""The GPU lowering: linalg-on-tensors (after fusion) -> a host function of launches,
BLAS calls and buffer views, plus one gpu.module per kernel lowered to NVVM or ROCDL.

    func @forward(%x: memref<4x16xf32>, ...) -> memref<4x32xf32> {
      %a = memref.alloc() ; gpu.launch_func @forward_kernel::@forward_kernel blocks in (..)
      func.call @ember_gpu_contract_0(%x, %w, %a) {ember.einsum = "ab,cb->ac"} ...
    }
    gpu.module @forward_kernel { llvm.func @forward_kernel(...) attributes {nvvm.kernel} }

The host function is not compiled: host_plan.py turns it into a Python launch plan.
"""
from ember.compiler.passes import register_python_pass
from ember.compiler.pipeline import run_pipeline
from ember.targets.cpu import memref_copy, pipeline as _cpu_pipeline  # noqa: F401 (registers its passes)
from . import block_reductions, contractions, interchange, launches, vendor_conversion

register_python_pass(contractions.PASS_NAME, contractions.contractions_to_calls,
                     "f32 multiply-accumulate linalg.generic on memrefs -> a BLAS call of the "
                     "host plan", "bufferized")
register_python_pass(interchange.PASS_NAME, interchange.parallel_dims_first,
                     "permute linalg.generic loops: parallel dimensions before reductions")
register_python_pass(block_reductions.PASS_NAME, block_reductions.block_reductions,
                     "reductions -> one block per output, a shared-memory tree of partials",
                     "bufferized")
register_python_pass(launches.PASS_NAME, launches.loops_to_launches,
                     "top-level scf.parallel -> gpu.launch over a linearised 1-d grid",
                     "bufferized")

register_python_pass(vendor_conversion.NVVM_PASS_NAME, vendor_conversion.convert_to_nvvm,
                     "each gpu.module -> NVVM (bare pointers where the kernel's buffers allow)")
register_python_pass(vendor_conversion.ROCDL_PASS_NAME, vendor_conversion.convert_to_rocdl,
                     "each gpu.module -> ROCDL (bare pointers where the kernel's buffers allow)")

BUFFERIZE = [
    "ember-zero-size-arguments",  # unused (5, 0) inputs: a shape bare pointers take
    "ember-read-only-arguments",  # the caller's tensors: copy before writing, never in place
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}",
    "canonicalize",
    memref_copy.PASS_NAME,
]

TO_KERNELS = [
    "func.func(linalg-generalize-named-ops)",
    contractions.PASS_NAME,
    interchange.PASS_NAME,
    block_reductions.PASS_NAME,
    "func.func(convert-linalg-to-parallel-loops)",
    launches.PASS_NAME,
    "canonicalize",
    # Without sinking, constants (loop bounds, GELU's coefficients) become kernel arguments.
    "gpu-launch-sink-index-computations",
    "gpu-kernel-outlining",
    # Views become reinterpret_casts of a base buffer (torch.as_strided on the host).
    "expand-strided-metadata",
    "lower-affine",
    "canonicalize",
]

TO_NVVM = [vendor_conversion.NVVM_PASS_NAME, "reconcile-unrealized-casts"]
TO_ROCDL = [vendor_conversion.ROCDL_PASS_NAME, "reconcile-unrealized-casts"]


def lower_to_kernels(module, *, print_ir_after_all=False):
    """Bufferize and form the kernels (gpu.module per launch), vendor-neutral."""
    return run_pipeline(module, BUFFERIZE + TO_KERNELS, print_ir_after_all=print_ir_after_all,
                        stage="gpu-kernels")


def to_vendor(module, vendor, *, print_ir_after_all=False):
    """Each gpu.module -> NVVM ("cuda") or ROCDL ("rocm")."""
    return run_pipeline(module, TO_NVVM if vendor == "cuda" else TO_ROCDL,
                        print_ir_after_all=print_ir_after_all, stage=f"{vendor}-lowering")


def lower_to_gpu(module, vendor="cuda", *, print_ir_after_all=False):
    lower_to_kernels(module, print_ir_after_all=print_ir_after_all)
    return to_vendor(module, vendor, print_ir_after_all=print_ir_after_all)
