"""Torch-dialect MLIR -> native object code: the part of compilation that can abort.

Runs inside the codegen worker (compiler/worker.py), never in the user's process:
torch-mlir's lowering, ember's fusion and CPU passes, and LLVM can hit an assertion, a
SIGFPE or a segfault on IR they do not expect. The result is plain data (an ELF object and
a few numbers) that the user's process loads with llvmlite (targets/cpu/loader.py).
"""
import os
import tempfile
import time

from torch_mlir import ir

ENTRY = "forward"


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


def build_object(torch_ir, *, opt_level=3, dump_dir=None, name="graph", in_place=()):
    """Compile torch-dialect bytecode; return a dict:
    ok=True: object (bytes), workspace_bytes, stats, error_messages (run-time checks),
    in_place: the (output, input) pairs of `in_place` whose output may be written into
    the input's memory (compiler/in_place_outputs.py);
    ok=False: stage ('import' | 'lowerable' | 'pipeline' | 'llvm'), message, ops."""
    from torch_mlir.execution_engine import ExecutionEngine

    from ember.compiler import importer
    from ember.compiler.fusion import fuse
    from ember.compiler.in_place_outputs import in_place_outputs
    from ember.compiler.pipeline import PipelineError
    from ember.targets.cpu import lower_to_llvm, workspace_bytes
    from ember.targets.cpu import aten_math, run_time_checks, runtime_symbols

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
    _dump(dump_dir, name, "linalg", module)
    t1 = time.perf_counter()
    try:
        fuse(module, stats)
        _dump(dump_dir, name, "fused", module)
        with module.context:
            writable = in_place_outputs(module, in_place, importer.ENTRY)
        lower_to_llvm(module)
    except PipelineError as exc:
        return {"ok": False, "stage": "pipeline", "message": str(exc)}
    _dump(dump_dir, name, "llvm", module)
    error_messages = run_time_checks.error_messages(module.operation)
    t2 = time.perf_counter()
    scratch = workspace_bytes(module)
    try:
        engine = ExecutionEngine(module, opt_level=opt_level, enable_object_dump=True)
        import ctypes
        for symbol in runtime_symbols.known_symbols() + aten_math.all_symbols():
            # Resolved for real when the object is loaded; here only codegen runs.
            engine.raw_register_runtime(symbol, ctypes.c_void_p(0x1000))
        if not engine.raw_lookup(ENTRY):
            return {"ok": False, "stage": "llvm", "message": f"entry '{ENTRY}' not emitted"}
        with tempfile.TemporaryDirectory(prefix="ember-obj-") as tmp:
            path = os.path.join(tmp, "kernel.o")
            engine.dump_to_object_file(path)
            with open(path, "rb") as f:
                obj = f.read()
    except Exception as exc:
        return {"ok": False, "stage": "llvm", "message": str(exc)}
    t3 = time.perf_counter()
    stats.update(import_s=t1 - t0, lower_s=t2 - t1, llvm_s=t3 - t2)
    return {"ok": True, "object": obj, "workspace_bytes": scratch, "stats": stats,
            "error_messages": error_messages, "in_place": writable}
