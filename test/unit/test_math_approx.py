"""The polynomial exp/erf (ember-approximate-math) over the whole f32 range, edges included."""
import pytest
import torch

from helpers import compile_strict

EDGES = [float("-inf"), float("inf"), float("nan"), -1e30, 1e30, -200.0, 200.0,
         -104.0, -88.5, -87.4, -87.3, 88.3, 88.5, 89.0, -4.5, 4.5, 0.0, -0.0, 1e-8, -1e-8]


def _inputs():
    g = torch.Generator().manual_seed(0)
    dense = torch.linspace(-90.0, 90.0, 4001)
    small = torch.randn(4000, generator=g) * 3
    return torch.cat([dense, small, torch.tensor(EDGES)])


@pytest.mark.parametrize("fn", [torch.exp, torch.erf, torch.tanh, torch.sigmoid],
                         ids=["exp", "erf", "tanh", "sigmoid"])
def test_matches_libm_in_relative_terms(fn):
    x = _inputs()
    with torch.no_grad():
        actual = compile_strict(fn)(x)
    expected = fn(x)
    # Relative error of a few ulp over the range; exact at inf/nan/underflow edges.
    torch.testing.assert_close(actual, expected, rtol=2e-6, atol=1e-30, equal_nan=True)
