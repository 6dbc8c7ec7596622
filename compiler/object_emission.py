"""LLVM-dialect module -> object files, the parts compiled at the same time on the cores
this process may use (targets/cpu/split_module.py says how a module is cut).

Runs in the codegen worker. Part 0 is compiled here; each other part in a forked child of
the worker, which writes its object to a file and exits: LLVM keeps global state, so one
process runs one LLVM at a time. A child that dies makes the graph's compile fail like a
crashed worker would (the graph then runs through ATen); a child that hangs is killed and
its part compiled here instead.
"""
import ctypes
import os
import tempfile
import time

from torch_mlir import ir

from .importer import ENTRY

MAX_PARTS = 4
# A child is given this long, or this many times what part 0 took here, whichever is more.
CHILD_GRACE_S, CHILD_GRACE_FACTOR = 60.0, 10.0


class EmissionError(RuntimeError):
    """LLVM failed on a part (message from LLVM, or how a child died)."""


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _compile_text(text, opt_level, path, defined):
    """Compile one part's text to an object file at `path`."""
    from torch_mlir.execution_engine import ExecutionEngine

    from ember.compiler import importer
    from ember.targets.cpu import aten_math, runtime_symbols

    with importer.torch_context() as (context, diagnostics):
        with context:
            module = ir.Module.parse(text)
        engine = ExecutionEngine(module, opt_level=opt_level, enable_object_dump=True)
        external = set(runtime_symbols.known_symbols()) | set(aten_math.all_symbols())
        external |= _declared_here(module) - set(defined or ())
        for symbol in sorted(external):
            # Resolved for real when the objects are loaded; here only codegen runs.
            engine.raw_register_runtime(symbol, ctypes.c_void_p(0x1000))
        if not engine.raw_lookup(ENTRY if defined is None or ENTRY in defined else defined[0]):
            raise EmissionError(f"'{ENTRY if defined is None else defined[0]}' not emitted")
        engine.dump_to_object_file(path)


def _declared_here(module):
    """Functions and globals the part declares without defining: defined in other parts."""
    from ember.compiler.ir_walk import symbol_name

    names = set()
    for o in module.body.operations:
        op = o.operation
        if op.name == "llvm.func" and not op.regions[0].blocks:
            names.add(symbol_name(op))
        elif op.name == "llvm.mlir.global" and "value" not in op.attributes \
                and not op.regions[0].blocks:
            names.add(symbol_name(op))
    return names


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _fork_part(text, opt_level, path, defined):
    pid = os.fork()
    if pid == 0:  # child: compile, write the object, leave without running any cleanup
        code = 1
        try:
            _compile_text(text, opt_level, path, defined)
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported through the file
            try:
                with open(path + ".err", "w") as f:
                    f.write(f"{type(exc).__name__}: {exc}")
            except OSError:
                pass
        os._exit(code)
    return pid


def _wait(pid, deadline):
    """The child's exit status, or None when it is still running at `deadline`."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)


def emit_objects(module, opt_level):
    """[object bytes, ...] for the lowered module, in load order."""
    from ember.targets.cpu.split_module import split_module

    parts = split_module(module, min(MAX_PARTS, usable_cores())) if hasattr(os, "fork") \
        else [(str(module), None)]
    with tempfile.TemporaryDirectory(prefix="ember-obj-") as tmp:
        paths = [os.path.join(tmp, f"part{i}.o") for i in range(len(parts))]
        children = {i: _fork_part(parts[i][0], opt_level, paths[i], parts[i][1])
                    for i in range(1, len(parts))}
        t0 = time.monotonic()
        try:
            _compile_text(parts[0][0], opt_level, paths[0], parts[0][1])
        except BaseException:
            for pid in children.values():
                _kill(pid)
            raise
        deadline = time.monotonic() + max(CHILD_GRACE_S,
                                          CHILD_GRACE_FACTOR * (time.monotonic() - t0))
        for i, pid in children.items():
            status = _wait(pid, deadline)
            if status is None:  # hung (a lock held at fork time): do it here
                _kill(pid)
                _compile_text(parts[i][0], opt_level, paths[i], parts[i][1])
                continue
            if os.WIFSIGNALED(status) or os.WEXITSTATUS(status) != 0:
                for other in children.values():
                    _kill(other)
                detail = (_read(paths[i] + ".err").decode(errors="replace")
                          if os.path.exists(paths[i] + ".err") else
                          f"killed by signal {os.WTERMSIG(status)}"
                          if os.WIFSIGNALED(status) else f"status {os.WEXITSTATUS(status)}")
                raise EmissionError(f"LLVM failed on part {i} of {len(parts)}: {detail}")
        return [_read(p) for p in paths]


def _kill(pid):
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
