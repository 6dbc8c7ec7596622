"""The `ember` backend for torch.compile: Dynamo graph -> AOTAutograd -> ember kernels.

Graphs ember cannot lower run eagerly (the functionalized ATen graph itself) after one
warning naming the op; `options={"fallback": False}` or EMBER_STRICT=1 makes that an error.
"""
import functools
import logging
import os
import warnings

import torch
from torch._dynamo.backends.common import aot_autograd

from ember.compiler.capture import decomposition_table
from ember.errors import EmberUnsupportedError

log = logging.getLogger("ember")
_warned = set()
_KNOWN_OPTIONS = {"fallback", "target"}


def _strict(options):
    if "fallback" in options:
        return not options["fallback"]
    return os.environ.get("EMBER_STRICT", "0") not in ("", "0", "false", "False")


def _compile_or_fallback(gm, example_inputs, *, options):
    from ember.compiler.driver import compile_graph

    try:
        compiled = compile_graph(gm, example_inputs, target=options.get("target", "cpu"))
    except EmberUnsupportedError as exc:
        if _strict(options):
            raise
        key = (exc.op, exc.detail)
        if key not in _warned:
            _warned.add(key)
            warnings.warn(f"{exc}; running this graph eagerly", stacklevel=2)
        log.info("ember fallback: %s", exc)
        return gm  # the functionalized ATen graph runs eagerly

    def run(*args):
        return compiled(*args)

    run._ember_compiled = compiled
    return run


def make_backend(options=None):
    options = dict(options or {})
    unknown = set(options) - _KNOWN_OPTIONS
    if unknown:
        raise ValueError(f"ember: unknown option(s) {sorted(unknown)}; known: {sorted(_KNOWN_OPTIONS)}")
    compiler = functools.partial(_compile_or_fallback, options=options)
    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler,
                        inference_compiler=compiler, decompositions=decomposition_table())


def ember_backend(gm, example_inputs, options=None, **kwargs):
    """Entry point registered as torch_dynamo_backends 'ember'."""
    return make_backend(options)(gm, example_inputs)
