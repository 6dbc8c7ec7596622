"""Shared by the tests: compile with ember (strict) and compare to eager."""
import torch

import ember


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
