"""ember-opt: like mlir-opt, with ember's dialects and Python passes.

    ember-opt in.mlir --pass-pipeline='builtin.module(ember-form-fusion-groups,canonicalize)'
    ember-opt --ember-form-fusion-groups --canonicalize < in.mlir
    ember-opt --list-passes
"""
import argparse
import os
import pickle
import re
import signal
import sys

from torch_mlir import ir

from ember.compiler.passes import PASS_DESCRIPTIONS, PIPELINE_ALIASES, PYTHON_PASSES
from ember.compiler.pipeline import PipelineError, run_pipeline, split_top_level
from ember.dialects import load_ember_dialects

import ember.targets.cpu.pipeline  # noqa: F401  (registers the CPU passes)
import ember.targets.gpu.pipeline  # noqa: F401  (registers the GPU passes)


def load_torch_dialects(context):
    """Register the torch dialect and load TMTensor (it has no Python registration: a pass
    that produces it loads it when it runs, here on an empty module). Here rather than
    from compiler/importer, which imports torch (2 s per ember-opt run)."""
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.passmanager import PassManager

    torch_d.register_dialect(context)
    with context, ir.Location.unknown():
        PassManager.parse("builtin.module(func.func(convert-torch-to-tmtensor))").run(
            ir.Module.create().operation)


_SPLIT_MARKER = "// -----"


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="ember-opt", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", nargs="?", default="-", help=".mlir file, or - for stdin")
    p.add_argument("--pass-pipeline", default=None)
    p.add_argument("--print-ir-after-all", action="store_true")
    p.add_argument("--split-input-file", action="store_true")
    p.add_argument("--list-passes", action="store_true")
    p.add_argument("-o", "--output", default="-")
    args, rest = p.parse_known_args(argv)
    # Every other `--name` or `--name=opts` is a pass flag, in order.
    flags = []
    for r in rest:
        if not r.startswith("--"):
            p.error(f"unexpected argument {r!r}")
        name, _, opts = r[2:].partition("=")
        flags.append(f"{name}{{{opts}}}" if opts else name)
    return args, flags


def _list_passes(out):
    out.write("ember passes:\n")
    for name in sorted(set(PYTHON_PASSES) | set(PIPELINE_ALIASES)):
        out.write(f"  --{name:32s} {PASS_DESCRIPTIONS.get(name, '')}\n")
    out.write("upstream passes: every MLIR / torch-mlir pass, by its mlir-opt name "
              "(e.g. --canonicalize, --one-shot-bufferize)\n")


def _process(text, elements, print_ir_after_all):
    with ir.Context() as ctx, ir.Location.unknown():
        load_torch_dialects(ctx)  # torch and tm_tensor IR, for the passes that take them
        load_ember_dialects(ctx)
        module = ir.Module.parse(text)
        if elements:
            run_pipeline(module, elements, print_ir_after_all=print_ir_after_all)
        module.operation.verify()
        return str(module)


def _error(message):
    sys.stderr.write(f"ember-opt: error: {message}\n")
    return 1


def _read_input(path):
    """(text, None) or (None, error message); mlir-opt's wording."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()
    except OSError as exc:
        return None, f"could not open input file '{path}': {exc.strerror}"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        return None, f"{path}:{line}: input is not valid UTF-8 (byte 0x{data[exc.start]:02x})"


def _with_locations(message, path, first_line):
    """MLIR names a parsed string "-": point its diagnostics at file:line:col instead."""
    name = "<stdin>" if path == "-" else path

    def fix(m):
        return f"{name}:{int(m.group(1)) + first_line - 1}:{m.group(2)}"

    return re.sub(r'(?:"-"|loc\("-"):(\d+):(\d+)\)?', fix, message)


def _run_isolated(fn):
    """fn() in a forked child, so that an LLVM/MLIR abort or segfault in a pass becomes a
    diagnostic: returns ("ok", value) | ("error", message) | ("crash", description)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            try:
                reply = ("ok", fn())
            except PipelineError as exc:
                reply = ("error", str(exc))
            except Exception as exc:  # parse / verify errors
                reply = ("error", str(exc))
            with os.fdopen(write_fd, "wb") as pipe:
                pickle.dump(reply, pipe)
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if data:
        return pickle.loads(data)
    if os.WIFSIGNALED(status):
        try:
            what = signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            what = f"signal {os.WTERMSIG(status)}"
        return "crash", f"the pass pipeline crashed ({what})"
    return "crash", f"the pass pipeline exited with status {os.WEXITSTATUS(status)}"


def main(argv=None):
    args, flags = _parse_args(sys.argv[1:] if argv is None else argv)
    if args.list_passes:
        _list_passes(sys.stdout)
        return 0
    text, problem = _read_input(args.input)
    if problem:
        return _error(problem)
    elements = (split_top_level(args.pass_pipeline) if args.pass_pipeline else []) + flags
    chunks = text.split(_SPLIT_MARKER) if args.split_input_file else [text]
    status = 0
    results = []
    first_line = 1
    for chunk in chunks:
        kind, value = _run_isolated(lambda: _process(chunk, elements, args.print_ir_after_all))
        if kind == "ok":
            results.append(value)
        else:
            message = _with_locations(value, args.input, first_line)
            sys.stderr.write(message if message.startswith("ember") else
                             f"ember-opt: error: {message}")
            sys.stderr.write("\n")
            status = 1
        first_line += chunk.count("\n")
    try:
        out = sys.stdout if args.output == "-" else open(args.output, "w")
    except OSError as exc:
        return _error(f"could not open output file '{args.output}': {exc.strerror}")
    out.write(("\n" + _SPLIT_MARKER + "\n").join(results))
    if out is not sys.stdout:
        out.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
