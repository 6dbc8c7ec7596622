"""Torch-dialect MLIR -> native object code: the part of compilation that can abort.

Runs inside the codegen worker (compiler/worker.py), never in the user's process:
torch-mlir's lowering, ember's fusion and CPU passes, and LLVM can hit an assertion, a
SIGFPE or a segfault on IR they do not expect. The result is plain data (an ELF object and
a few numbers) that the user's process loads with llvmlite (targets/cpu/loader.py).
"""
import os
import time

from torch_mlir import ir



def _dump(dump_dir, name, stage, module):
    if dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
        with open(os.path.join(dump_dir, f"{name}.{stage}.mlir"), "w") as f:
            f.write(str(module))


def preload():
    """Import everything build_object uses (about 2 s): a prestarted worker does it before
    its first request arrives."""
    from torch_mlir.execution_engine import ExecutionEngine  # noqa: F401

    from ember.compiler import fusion, importer, pipeline  # noqa: F401
    from ember.targets.cpu import lower_to_llvm  # noqa: F401
    from ember.targets.cpu import aten_math, run_time_checks, runtime_symbols  # noqa: F401

    importer.torch_context  # noqa: B018


def lower_to_linalg(torch_ir):
    """(linalg-on-tensors module, None), or (None, the failed reply: stage 'import' with
    torch-mlir's diagnostics, or 'lowerable' with the ops it left)."""
    from ember.compiler import importer

    with importer.torch_context() as (context, diagnostics):
        with context:
            module = ir.Module.parse(torch_ir)
        try:
            importer.lower_torch_ir_to_linalg(module)
        except Exception as exc:
            return None, {"ok": False, "stage": "import",
                          "message": "\n".join(diagnostics + [str(exc)])}
    leftover = importer.leftover_ops(module)
    if leftover:
        return None, {"ok": False, "stage": "lowerable", "ops": leftover, "message": ""}
    return module, None


def build_object(torch_ir, *, opt_level=3, dump_dir=None, name="graph", in_place=()):
    """Compile torch-dialect bytecode; return a dict:
    ok=True: objects (bytes each, compiled in parallel: object_emission.py), workspace_bytes, stats, error_messages (run-time checks),
    in_place: the (output, input) pairs of `in_place` whose output may be written into
    the input's memory (compiler/in_place_outputs.py);
    ok=False: stage ('import' | 'lowerable' | 'pipeline' | 'llvm'), message, ops."""
    from ember.compiler import importer
    from ember.compiler.fusion import fuse
    from ember.compiler.object_emission import emit_objects
    from ember.compiler.in_place_outputs import in_place_outputs
    from ember.compiler.pipeline import PipelineError
    from ember.targets.cpu import lower_to_llvm, workspace_bytes
    from ember.targets.cpu import run_time_checks

    stats = {}
    t0 = time.perf_counter()
    module, failure = lower_to_linalg(torch_ir)
    if failure:
        return failure
    _dump(dump_dir, name, "linalg", module)
    t1 = time.perf_counter()
    try:
        fuse(module, stats)
        _dump(dump_dir, name, "fused", module)
        with module.context:
            writable = in_place_outputs(module, in_place, importer.ENTRY)
            if writable:  # an output in an input's buffer: kernel arguments may alias
                from ember.targets.cpu.parallel import OUTPUTS_ALIAS_INPUTS
                module.operation.attributes[OUTPUTS_ALIAS_INPUTS] = ir.UnitAttr.get()
        lower_to_llvm(module)
    except PipelineError as exc:
        return {"ok": False, "stage": "pipeline", "message": str(exc)}
    _dump(dump_dir, name, "llvm", module)
    error_messages = run_time_checks.error_messages(module.operation)
    t2 = time.perf_counter()
    scratch = workspace_bytes(module)
    try:
        objects = emit_objects(module, opt_level)
    except Exception as exc:
        return {"ok": False, "stage": "llvm", "message": str(exc)}
    t3 = time.perf_counter()
    stats.update(import_s=t1 - t0, lower_s=t2 - t1, llvm_s=t3 - t2)
    return {"ok": True, "objects": objects, "workspace_bytes": scratch, "stats": stats,
            "error_messages": error_messages, "in_place": writable}
