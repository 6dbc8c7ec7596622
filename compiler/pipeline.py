"""Run pass pipelines that mix upstream MLIR passes (by name) and ember's Python passes.

A pipeline is a list of top-level elements, or a string `builtin.module(a,b,func.func(c))`
whose top-level elements are split out. Each element is an ember pass name, an alias
(expanded), or any upstream pipeline text understood by `PassManager.add`.
"""
import logging
import time

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from ember.dialects import load_ember_dialects
from .ir_walk import collect
from .passes import PASS_REQUIREMENTS, PYTHON_PASSES, PIPELINE_ALIASES

log = logging.getLogger("ember.pipeline")


class PipelineError(RuntimeError):
    """A pass failed; `element` names it and `diagnostics` holds MLIR's messages."""

    def __init__(self, element, diagnostics):
        self.element, self.diagnostics = element, diagnostics
        super().__init__(f"ember pass '{element}' failed:\n{diagnostics}")


def split_top_level(text):
    """'builtin.module(a,b{x=1,y=2},func.func(c,d))' -> ['a', 'b{x=1,y=2}', 'func.func(c,d)']."""
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def expand(elements):
    if isinstance(elements, str):
        elements = split_top_level(elements)
    out = []
    for e in elements:
        if e in PIPELINE_ALIASES:
            out.extend(expand(PIPELINE_ALIASES[e]))
        else:
            out.append(e)
    return out


def _pass_manager(elements, print_ir_after_all=False):
    pm = PassManager("builtin.module")
    for e in elements:
        if e in PYTHON_PASSES:
            pm.add(PYTHON_PASSES[e], name=e)
        else:
            pm.add(e)
    if print_ir_after_all:
        pm.enable_ir_printing()
    return pm


def _failure(element, diagnostics, exc, prefix=""):
    return PipelineError(element, prefix + "\n".join(diagnostics + [str(exc)]))


def _has_tensor_values(op):
    return any(isinstance(v.type, ir.RankedTensorType) or isinstance(v.type, ir.UnrankedTensorType)
               for v in list(op.operands) + list(op.results))


def _check_distinct_results(element, module):
    """buffer-results-to-out-params segfaults on a function that returns one value twice
    (or returns an argument): refuse such IR with a diagnostic instead."""
    for ret in collect(module.operation, lambda o: o.name == "func.return"):
        seen = []
        for value in ret.operands:
            if not isinstance(value.type, ir.MemRefType):
                continue
            if value in seen or isinstance(value.owner, ir.Block):
                why = "returns the same value twice" if value in seen else "returns an argument"
                raise PipelineError(element, f"{ret.location}: error: '{element}' cannot "
                                    f"take a function that {why} (ember returns each "
                                    "distinct computed value once)")
            seen.append(value)


def check_requirements(element, module, met=None):
    """Raise PipelineError when `element` cannot act on `module` (e.g. a bufferized-IR
    pass on tensor IR), with the location of the first op that shows it. `met`: the
    requirements already checked in this pipeline run (IR once bufferized stays so; a
    walk of a big module per pass cost 0.85 s on a training graph)."""
    if element.startswith("buffer-results-to-out-params"):
        _check_distinct_results(element, module)
    if PASS_REQUIREMENTS.get(element) != "bufferized":
        return
    if met is not None:
        if "bufferized" in met:
            return
        met.add("bufferized")
    found = collect(module.operation, lambda o: o.name != "func.func" and
                    _has_tensor_values(o.operation))
    if found:
        op = found[0]
        raise PipelineError(element, f"{op.location}: error: '{element}' runs on bufferized "
                            f"IR (memrefs), but '{op.name}' works on tensors; run "
                            "one-shot-bufferize (or the ember CPU pipeline) first")


def run_pipeline(module, elements, *, print_ir_after_all=False, stage="pipeline"):
    """Run `elements` on `module` in place; raise PipelineError naming the failing pass."""
    elements = expand(elements)
    ctx = module.context
    load_ember_dialects(ctx)
    start = time.perf_counter()
    diagnostics = []

    def handler(d):
        diagnostics.append(str(d.location) + ": " + d.message)
        return True

    with ctx:
        handle = ctx.attach_diagnostic_handler(handler)
        try:
            if print_ir_after_all:
                ctx.enable_multithreading(False)
                _pass_manager(elements, True).run(module.operation)
            else:
                # One pass manager per element so that a failure names its pass.
                met = set()
                for e in elements:
                    if e in PYTHON_PASSES:
                        check_requirements(e, module, met)
                        # Called directly so that a Python error keeps its traceback.
                        PYTHON_PASSES[e](module.operation, None)
                        try:
                            module.operation.verify()
                        except Exception as exc:
                            raise _failure(e, diagnostics, exc, "produced invalid IR: ") from None
                        continue
                    check_requirements(e, module, met)
                    try:
                        _pass_manager([e]).run(module.operation)
                    except Exception as exc:  # MLIRError carries the diagnostics
                        raise _failure(e, diagnostics, exc) from None
        finally:
            handle.detach()
    log.debug("%s: %d passes in %.3fs", stage, len(elements), time.perf_counter() - start)
    return module
