"""ember-opt: like mlir-opt, with ember's dialects and Python passes.

    ember-opt in.mlir --pass-pipeline='builtin.module(ember-form-fusion-groups,canonicalize)'
    ember-opt --ember-form-fusion-groups --canonicalize < in.mlir
    ember-opt --list-passes
"""
import argparse
import sys

from torch_mlir import ir

from ember.compiler.passes import PASS_DESCRIPTIONS, PIPELINE_ALIASES, PYTHON_PASSES
from ember.compiler.pipeline import PipelineError, run_pipeline, split_top_level
from ember.dialects import load_ember_dialects
import ember.targets.cpu  # noqa: F401  (registers the CPU passes)

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
        load_ember_dialects(ctx)
        module = ir.Module.parse(text)
        if elements:
            run_pipeline(module, elements, print_ir_after_all=print_ir_after_all)
        module.operation.verify()
        return str(module)


def main(argv=None):
    args, flags = _parse_args(sys.argv[1:] if argv is None else argv)
    out = sys.stdout if args.output == "-" else open(args.output, "w")
    if args.list_passes:
        _list_passes(out)
        return 0
    text = sys.stdin.read() if args.input == "-" else open(args.input).read()
    elements = (split_top_level(args.pass_pipeline) if args.pass_pipeline else []) + flags
    chunks = text.split(_SPLIT_MARKER) if args.split_input_file else [text]
    status = 0
    results = []
    for chunk in chunks:
        try:
            results.append(_process(chunk, elements, args.print_ir_after_all))
        except PipelineError as exc:
            sys.stderr.write(str(exc) + "\n")
            status = 1
        except Exception as exc:  # parse / verify errors
            sys.stderr.write(f"ember-opt: error: {exc}\n")
            status = 1
    out.write(("\n" + _SPLIT_MARKER + "\n").join(results))
    return status


if __name__ == "__main__":
    sys.exit(main())
