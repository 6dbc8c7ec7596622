"""The `ember` backend for torch.compile: Dynamo graph -> AOTAutograd -> ember kernels.

Never crash, never wrong: ops ember cannot lower run through ATen (compiler/graph_compiler.py)
after one warning naming the op; any other failure inside ember (a bug, an MLIR or LLVM
error, a crashed codegen worker) makes the whole graph run eagerly after one warning.
`options={"fallback": False}` or EMBER_STRICT=1 turns both into errors.
"""
import functools
import logging
import os

import torch

from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._dynamo.exc import ShortenTraceback, TensorifyScalarRestartAnalysis

from ember.compiler.capture import decomposition_table
from ember.compiler.diagnostics import warn_once
from ember.errors import EmberError, EmberUnsupportedError

log = logging.getLogger("ember")
_OPTION_TYPES = {"fallback": bool, "target": str, "conv": str, "attention": str,
                 "freezing": bool}
_TARGETS = ("cpu", "cuda", "rocm")
_CONV_CHOICES = ("aten", "ember")
_ATTENTION_CHOICES = ("aten", "ember")


def _strict(options):
    if "fallback" in options:
        return not options["fallback"]
    return os.environ.get("EMBER_STRICT", "0").strip().lower() not in ("", "0", "false", "no", "off")


def validate_options(options):
    options = dict(options or {})
    unknown = set(options) - set(_OPTION_TYPES)
    if unknown:
        raise ValueError(f"ember: unknown option(s) {sorted(unknown)}; known: {sorted(_OPTION_TYPES)}")
    for name, kind in _OPTION_TYPES.items():
        if name in options and not isinstance(options[name], kind):
            raise TypeError(f"ember: option {name!r} must be a {kind.__name__}, "
                            f"got {options[name]!r}")
    if options.get("conv", "aten") not in _CONV_CHOICES:
        raise ValueError(f"ember: unknown conv {options['conv']!r}; known: {list(_CONV_CHOICES)}")
    if options.get("attention", "aten") not in _ATTENTION_CHOICES:
        raise ValueError(f"ember: unknown attention {options['attention']!r}; "
                         f"known: {list(_ATTENTION_CHOICES)}")
    if options.get("target", "cpu") not in _TARGETS:
        raise ValueError(f"ember: unknown target {options['target']!r}; known: {list(_TARGETS)}")
    return options


class EmberStrictError(EmberError, ShortenTraceback):
    """Strict mode's error. A ShortenTraceback passes through Dynamo unwrapped, so the
    user's first line is ember's message, not "backend='...' raised:"."""

    def __init__(self, message):
        ShortenTraceback.__init__(self, message, first_useful_frame=None)


class EmberStrictUnsupportedError(EmberStrictError, EmberUnsupportedError):
    def __init__(self, exc):
        self.op, self.shapes, self.detail = exc.op, exc.shapes, exc.detail
        EmberStrictError.__init__(self, str(exc))


def strict_error(exc):
    """The exception strict mode raises for `exc` (any error inside ember)."""
    if isinstance(exc, EmberStrictError):
        return exc
    if isinstance(exc, EmberUnsupportedError):
        return EmberStrictUnsupportedError(exc)
    if isinstance(exc, EmberError):
        return EmberStrictError(str(exc))
    return EmberStrictError(f"ember failed on this graph: {type(exc).__name__}: {exc}")


def _warn_fallback(exc, consequence="running this graph eagerly"):
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    what = "" if isinstance(exc, EmberError) else f"internal error {type(exc).__name__}: "
    prefix = "" if first.startswith("ember") else "ember: "
    warn_once((type(exc).__name__, first),
              f"{prefix}{what}{first}; {consequence}", stacklevel=4)
    log.info("ember fallback: %s", exc, exc_info=not isinstance(exc, EmberError))


def _mutated_inputs():
    """(graph output j, input i): AOTAutograd's forward / inference graph returns the new
    value of each input it mutates first, in `mutated_inp_runtime_indices` order, and
    copies it back itself. Metadata mutations (resize, set_) are left out."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    if meta is None:
        return ()
    pairs = []
    for j, i in enumerate(meta.mutated_inp_runtime_indices):
        info = meta.input_info[i]
        if info.mutates_data and not info.mutates_metadata and \
                not info.mutates_storage_metadata:
            pairs.append((j, i))
    return tuple(pairs)


def _frozen(gm, example_inputs, options):
    """(gm, example_inputs, FrozenInputs or None): the weights folded out of an inference
    graph when the user asked for freezing (compiler/freezing.py)."""
    from ember.compiler.freezing import freezable_inputs, freeze
    from ember.compiler.graph_outputs import _copy_graph

    try:
        work = torch.fx.GraphModule(gm, _copy_graph(gm.graph))
        result = freeze(work, example_inputs, freezable_inputs(len(example_inputs)))
    except Exception as exc:
        if _strict(options):
            raise strict_error(exc) from exc
        _warn_fallback(exc, "this graph runs without freezing")
        return gm, example_inputs, None
    return result if result is not None else (gm, example_inputs, None)


def _compile_or_fallback(gm, example_inputs, *, options, forward=False, inference=False):
    from ember.compiler.graph_compiler import compile_fx_graph
    from ember.compiler.gpu_driver import default_target

    strict = _strict(options)
    mutated = _mutated_inputs() if forward else ()
    frozen = None
    if inference and options.get("freezing"):
        gm, example_inputs, frozen = _frozen(gm, example_inputs, options)
        if frozen is not None:
            mutated = tuple((j, frozen.remap_input(i)) for j, i in mutated)
    try:
        target = options.get("target") or default_target(example_inputs)
        compiled = compile_fx_graph(gm, example_inputs, target=target,
                                    options=options, strict=strict, mutated_inputs=mutated)
    except Exception as exc:
        if strict:
            raise strict_error(exc) from exc
        _warn_fallback(exc)
        compiled = gm  # the functionalized ATen graph runs eagerly
    if frozen is not None:
        per_call = compiled

        def compiled(*args):
            return per_call(*frozen.arguments(args))
    # Boxed: AOTAutograd hands over its argument list, which lets it free inputs early.
    return make_boxed_func(compiled)


def _default_attention(options):
    """ATen's flash attention where it is CPU code (the CPU target; GPU tensors never
    dispatch to it); ember's kernels when a GPU target is asked for, where the CPU op
    only appears under the host executor (tests) and would run outside the GPU plan."""
    return "ember" if options.get("target") in ("cuda", "rocm") else "aten"


def make_backend(options=None):
    options = validate_options(options)
    compiler = functools.partial(_compile_or_fallback, options=options)
    # Only forward / inference graphs return mutated inputs' new values (see above).
    forward_compiler = functools.partial(_compile_or_fallback, options=options, forward=True)
    inference_compiler = functools.partial(_compile_or_fallback, options=options, forward=True,
                                           inference=True)
    # Inductor's partitioner: the backward recomputes cheap pointwise ops from what the
    # forward saves (a min cut of the joint graph) instead of saving every intermediate.
    inner = aot_autograd(fw_compiler=forward_compiler, bw_compiler=compiler,
                         inference_compiler=inference_compiler, decompositions=decomposition_table(
                             conv=options.get("conv", "aten"),
                             attention=options.get("attention", _default_attention(options))),
                         partition_fn=min_cut_rematerialization_partition)

    def ember(gm, example_inputs, **kwargs):
        from ember.compiler.worker import prestart_worker

        prestart_worker()  # boots while AOTAutograd traces
        # AOTAutograd's tracing (decompositions, functionalization) can fail too: the
        # Dynamo graph then runs as it is, eagerly.
        try:
            return inner(gm, example_inputs, **kwargs)
        except TensorifyScalarRestartAnalysis:
            raise  # Dynamo's own control flow
        except Exception as exc:
            if _strict(options):
                raise strict_error(exc) from exc
            _warn_fallback(exc)
            return gm.forward

    return ember


def ember_backend(gm, example_inputs, options=None, **kwargs):
    """Entry point registered as torch_dynamo_backends 'ember'."""
    return make_backend(options)(gm, example_inputs)
