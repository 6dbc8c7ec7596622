"""Shared by the tests: compile with ember (strict) and compare to eager."""
import torch
from torch._dynamo.backends.common import aot_autograd

import ember
from ember.compiler import importer
from ember.compiler.capture import decomposition_table


def compile_strict(fn):
    return ember.compile(fn, options={"fallback": False})


def assert_matches_eager(fn, *inputs, rtol=1e-4, atol=1e-4, grad=False):
    expected = fn(*inputs)
    compiled = compile_strict(fn)
    if grad:
        actual = compiled(*inputs)
    else:
        with torch.no_grad():
            actual = compiled(*inputs)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    return actual


def assert_compiles_like_eager_inputs_intact(fn, inputs, grad):
    """fn compiled (strict) equals eager, in grad mode too, and leaves its inputs as they were."""
    import pytest

    if grad and not inputs[0].is_floating_point():
        pytest.skip("integer inputs take no grad")
    inputs = [t.clone().requires_grad_(grad and k == 0) for k, t in enumerate(inputs)]
    before = [t.detach().clone() for t in inputs]
    with torch.set_grad_enabled(grad):
        expected = fn(*[t.detach().clone() for t in inputs])
        actual = compile_strict(fn)(*inputs)
    torch.testing.assert_close(actual, expected, equal_nan=True,
                               check_dtype=True, rtol=1e-5, atol=1e-5)
    for t, b in zip(inputs, before):
        torch.testing.assert_close(t.detach(), b, equal_nan=True, rtol=0, atol=0)


def linalg_module(fn, *inputs):
    """The linalg-on-tensors module ember imports for `fn` (one graph expected)."""
    captured = []

    def grab(gm, example_inputs):
        captured.append(importer.import_to_linalg(gm))
        return gm

    backend = aot_autograd(fw_compiler=grab, decompositions=decomposition_table())
    with torch.no_grad():
        torch.compile(fn, backend=backend, dynamic=False)(*inputs)
    assert len(captured) == 1
    return captured[0]
