"""Torch-dialect MLIR -> a GPU program: a host launch plan (plain data) and device code
(PTX, a cubin when ptxas is installed, and for tests a host object of the same kernels).
Runs in the codegen worker, like codegen.py: MLIR, ptxas and llvmlite's LLVM can abort.

Identical kernels (identical layers give identical fusion groups) are compiled once:
kernels are deduplicated by their LLVM text with the name taken out.
"""
import time

from ember.compiler.codegen import _dump


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


def build_gpu_program(torch_ir, *, vendor="cuda", arch=None, host_executor=False,
                      dump_dir=None, name="graph"):
    """ok=True: arguments, steps (host_plan.py), kernels ({launch name: kernel}),
    signatures ({kernel: param types}), ptx, cubin (or None), host_object (or None),
    stats; ok=False: stage, message (and ops for 'lowerable')."""
    from torch_mlir import ir

    from ember.compiler import importer
    from ember.compiler.fusion import fuse
    from ember.compiler.pipeline import PipelineError
    from ember.targets.cuda import ptx as cuda_ptx
    from ember.targets.gpu import host_executor as executor
    from ember.targets.gpu.host_plan import HostPlanError, build_host_plan
    from ember.targets.gpu.llvm_handoff import (HandoffError, gpu_modules, kernel_signature,
                                                translate_gpu_module)
    from ember.targets.gpu.pipeline import lower_to_gpu

    if vendor != "cuda":
        return {"ok": False, "stage": "pipeline",
                "message": f"the {vendor} device code generation is not built yet"}
    stats = {}
    t0 = time.perf_counter()
    with importer.torch_context() as (context, diagnostics):
        with context:
            module = ir.Module.parse(torch_ir)
        try:
            importer.lower_torch_ir_to_linalg(module)
        except Exception as exc:
            return {"ok": False, "stage": "import", "message": "\n".join(diagnostics + [str(exc)])}
        leftover = importer.leftover_ops(module)
        if leftover:
            return {"ok": False, "stage": "lowerable", "ops": leftover, "message": ""}
        t1 = time.perf_counter()
        try:
            fuse(module, stats)
            _dump(dump_dir, name, "fused", module)
            lower_to_gpu(module, vendor)
        except PipelineError as exc:
            return {"ok": False, "stage": "pipeline", "message": str(exc)}
        _dump(dump_dir, name, vendor, module)
        try:
            arguments, steps = build_host_plan(module.operation, importer.ENTRY)
        except HostPlanError as exc:
            return {"ok": False, "stage": "pipeline", "message": str(exc)}
        try:
            with context:
                unique, alias = _dedupe([translate_gpu_module(g)
                                         for g in gpu_modules(module)])
        except HandoffError as exc:
            return {"ok": False, "stage": "pipeline", "message": str(exc)}
    t2 = time.perf_counter()
    try:
        texts = [t for _, t in unique]
        linked = cuda_ptx.link_kernels(texts, cuda_ptx.TRIPLE, cuda_ptx.DATA_LAYOUT)
        signatures = {n: kernel_signature(linked, n) for n, _ in unique}
        arch = arch or cuda_ptx.DEFAULT_ARCH
        ptx = cuda_ptx.ptx_of(texts, list(signatures), arch) if unique else ""
        cubin = cuda_ptx.check_with_ptxas(ptx, arch) if unique else None
        host_object = (executor.host_object([(n, t, signatures[n]) for n, t in unique])
                       if host_executor and unique else None)
    except Exception as exc:
        return {"ok": False, "stage": "llvm", "message": f"{type(exc).__name__}: {exc}"}
    t3 = time.perf_counter()
    stats.update(import_s=t1 - t0, lower_s=t2 - t1, llvm_s=t3 - t2,
                 kernels=len(alias), unique_kernels=len(unique),
                 ptxas_checked=cubin is not None)
    return {"ok": True, "arguments": arguments, "steps": steps, "kernels": alias,
            "signatures": signatures, "ptx": ptx, "cubin": cubin, "arch": arch,
            "host_object": host_object, "stats": stats}
