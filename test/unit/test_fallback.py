"""An op ember cannot lower: eager fallback with one warning, or a clear error when strict."""
import warnings

import pytest
import torch

import ember
from ember.compiler.diagnostics import reset as reset_warnings


def unsupported(x):
    return torch.frexp(x * x + 1).mantissa + 1  # torch-mlir has no lowering for frexp


def test_fallback_warns_once_and_is_correct(monkeypatch):
    monkeypatch.delenv("EMBER_STRICT", raising=False)
    reset_warnings()
    fast = ember.compile(unsupported)
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = fast(x)
        second = fast(x)
        third = ember.compile(unsupported)(torch.randn(4, 8))
    ours = [w for w in caught if "ember" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "aten.frexp" in str(ours[0].message)
    assert "(4, 8)" in str(ours[0].message)
    torch.testing.assert_close(first, unsupported(x))
    torch.testing.assert_close(second, unsupported(x))
    assert third.shape == (4, 8)


def test_strict_option_raises_naming_op():
    fast = ember.compile(unsupported, options={"fallback": False})
    with pytest.raises(Exception, match=r"aten\.frexp.*\(4, 8\)"):
        fast(torch.randn(4, 8))


def test_strict_env_raises(monkeypatch):
    monkeypatch.setenv("EMBER_STRICT", "1")
    fast = torch.compile(unsupported, backend="ember")
    with pytest.raises(Exception, match=r"ember cannot lower aten\.frexp"):
        fast(torch.randn(4, 8))


def test_unknown_option_is_rejected():
    with pytest.raises(ValueError, match="unknown option"):
        ember.compile(unsupported, options={"fallbak": False})
