"""Torch-dialect MLIR -> a GPU program: a host launch plan (plain data) and device code
(PTX, a cubin when ptxas is installed, and for tests a host object of the same kernels).
Runs in the codegen worker, like codegen.py: MLIR, ptxas and llvmlite's LLVM can abort.

Identical kernels (identical layers give identical fusion groups) are compiled once:
kernels are deduplicated by their LLVM text with the name taken out.
"""
import time

from ember.compiler.codegen import _dump, lower_to_linalg
from ember.targets.rocm import code_object as amd


def _dedupe(kernels):
    """[(module name, text)] -> (unique [(name, text)], {module name: unique name})."""
    unique, by_text, alias = [], {}, {}
    for name, text in kernels:
        anonymous = text.replace(f"@{name}(", "@__kernel__(")
        if anonymous not in by_text:
            by_text[anonymous] = name
            unique.append((name, text))
        alias[name] = by_text[anonymous]
    return unique, alias


def _translate(module, context):
    from ember.targets.gpu.llvm_handoff import gpu_modules, translate_gpu_module
    with context:
        return _dedupe([translate_gpu_module(g) for g in gpu_modules(module)])


def _cuda_code(unique, arch, host_executor):
    from ember.targets.cuda import ptx as cuda_ptx
    from ember.targets.gpu import host_executor as executor
    from ember.targets.gpu.llvm_handoff import kernel_signature

    texts = [t for _, t in unique]
    linked = cuda_ptx.link_kernels(texts, cuda_ptx.TRIPLE, cuda_ptx.DATA_LAYOUT)
    signatures = {n: kernel_signature(linked, n) for n, _ in unique}
    arch = arch or cuda_ptx.DEFAULT_ARCH
    ptx = cuda_ptx.ptx_of(texts, list(signatures), arch) if unique else ""
    return {"signatures": signatures, "arch": arch, "ptx": ptx,
            "cubin": cuda_ptx.check_with_ptxas(ptx, arch) if unique else None,
            "host_object": (executor.host_object([(n, t, signatures[n]) for n, t in unique])
                            if host_executor and unique else None)}


def _rocm_code(unique, arch):
    from ember.targets.cuda.ptx import link_kernels
    from ember.targets.gpu.llvm_handoff import kernel_signature
    from ember.targets.rocm import code_object as amd

    texts = [t for _, t in unique]
    arch = arch or amd.DEFAULT_ARCH
    linked = link_kernels(texts, amd.TRIPLE, "")
    signatures = {n: kernel_signature(linked, n) for n, _ in unique}
    hsaco = amd.code_object(texts, list(signatures), arch) if unique else b""
    descriptors = amd.kernel_descriptors(hsaco) if unique else {}
    missing = [n for n in signatures if descriptors.get(n) != 64]
    if missing:
        raise amd.CodeObjectError(f"the code object lacks the kernel descriptors of "
                                  f"{', '.join(missing)}")
    return {"signatures": signatures, "arch": arch, "hsaco": hsaco}


def build_gpu_program(torch_ir, *, vendor="cuda", arch=None, host_executor=False,
                      dump_dir=None, name="graph"):
    """ok=True: arguments, steps (host_plan.py), kernels ({launch name: kernel}),
    signatures ({kernel: param types}), device code (cuda: ptx, cubin or None; rocm:
    hsaco), host_object (or None), stats; ok=False: stage, message (and ops for
    'lowerable'). With host_executor and vendor "rocm", the AMD code object is built and
    checked, and the same kernels also in their NVVM form for the host executor."""
    from torch_mlir import ir

    from ember.compiler import importer
    from ember.compiler.fusion import fuse
    from ember.compiler.pipeline import PipelineError
    from ember.targets.gpu.host_plan import HostPlanError, build_host_plan
    from ember.targets.gpu.llvm_handoff import HandoffError
    from ember.targets.gpu.pipeline import lower_to_kernels, to_vendor

    stats = {}
    t0 = time.perf_counter()
    module, failure = lower_to_linalg(torch_ir)
    if failure:
        return failure
    context = module.context
    t1 = time.perf_counter()
    try:
        fuse(module, stats)
        _dump(dump_dir, name, "fused", module)
        lower_to_kernels(module)
        amd_module = None
        if vendor == "rocm":
            with context:
                amd_module = ir.Module.parse(str(module))
            to_vendor(amd_module, "rocm")
            _dump(dump_dir, name, "rocm", amd_module)
        if vendor == "cuda" or host_executor:
            to_vendor(module, "cuda")
            _dump(dump_dir, name, "cuda", module)
        arguments, steps = build_host_plan((amd_module or module).operation, importer.ENTRY)
        amd_unique, alias = _translate(amd_module, context) if amd_module else (None, None)
        unique = None
        if vendor == "cuda" or host_executor:
            unique, alias = _translate(module, context)
    except (PipelineError, HostPlanError, HandoffError) as exc:
        return {"ok": False, "stage": "pipeline", "message": str(exc)}
    t2 = time.perf_counter()
    reply = {"ok": True, "arguments": arguments, "steps": steps, "kernels": alias}
    try:
        if amd_unique is not None:
            reply.update(_rocm_code(amd_unique, arch if vendor == "rocm" else None))
        if unique is not None:
            # the host executor launches the NVVM kernels: their signatures count
            reply.update(_cuda_code(unique, arch if vendor == "cuda" else None, host_executor))
    except Exception as exc:
        return {"ok": False, "stage": "llvm", "message": f"{type(exc).__name__}: {exc}"}
    t3 = time.perf_counter()
    stats.update(import_s=t1 - t0, lower_s=t2 - t1, llvm_s=t3 - t2,
                 kernels=len(alias), unique_kernels=len(unique or amd_unique),
                 ptxas_checked=reply.get("cubin") is not None,
                 block_reductions=sum("barrier" in t for _, t in (unique or amd_unique)),
                 amd_kernels_linked=len(amd.kernel_descriptors(reply["hsaco"]))
                 if reply.get("hsaco") else 0)
    reply["stats"] = stats
    return reply
