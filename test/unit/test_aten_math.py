"""Issue 6, defect 18 (coverage): special functions torch-mlir cannot lower compile as
calls of ATen's own templates (targets/cpu/aten_math.py), with eager's values, and fall
back with a reason where no C++ compiler can build them."""
import os
import subprocess
import sys

import pytest
import torch

from helpers import compile_strict

torch.manual_seed(0)
_X = torch.cat([torch.randn(40) * 3, torch.tensor([0.0, 1.0, -1.0, float("inf"), float("nan")])])
_POS = _X.abs() + 0.1
_N = torch.tensor([0.0, 1, 2, 3, 5, 7, 9, 12, -1, 4, 30, 6, 8, 10, 2]).repeat(3)
_N = torch.cat([_N, _N[:_X.numel() - _N.numel()]])

CASES = {
    "i0": (torch.i0, (_X,)),
    "i0e": (torch.special.i0e, (_X,)),
    "i1": (torch.special.i1, (_X,)),
    "i1e": (torch.special.i1e, (_X,)),
    "ndtri": (torch.special.ndtri, (torch.rand(45),)),
    "erfinv": (torch.erfinv, (torch.rand(45) * 2 - 1,)),
    "igamma": (torch.igamma, (_POS, _POS.flip(0))),
    "igammac": (torch.igammac, (_POS, _POS.flip(0))),
    "airy_ai": (torch.special.airy_ai, (_X,)),
    "modified_bessel_i0": (torch.special.modified_bessel_i0, (_X,)),
    "modified_bessel_k1": (torch.special.modified_bessel_k1, (_POS,)),
    "scaled_modified_bessel_k0": (torch.special.scaled_modified_bessel_k0, (_POS,)),
    "chebyshev_polynomial_t": (torch.special.chebyshev_polynomial_t, (_X / 4, _N)),
    "shifted_chebyshev_polynomial_w": (torch.special.shifted_chebyshev_polynomial_w, (_X / 4, _N)),
    "hermite_polynomial_h": (torch.special.hermite_polynomial_h, (_X, _N)),
    "laguerre_polynomial_l": (torch.special.laguerre_polynomial_l, (_X, _N)),
    "legendre_polynomial_p": (torch.special.legendre_polynomial_p, (_X / 4, _N)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_function_compiles_with_eager_values(name):
    fn, inputs = CASES[name]
    compiled = compile_strict(lambda *a: fn(*a) * 2)
    # ATen's own code: equal to eager up to roundings of the last bits (FMA contraction).
    torch.testing.assert_close(compiled(*inputs), fn(*inputs) * 2, rtol=2e-6, atol=0,
                               equal_nan=True)


def test_special_function_in_float64_and_fused_with_its_neighbours():
    x = torch.randn(8, 16, dtype=torch.float64)
    fn = lambda x: torch.special.i1e(x.sin()) + torch.special.ndtri(torch.sigmoid(x))  # noqa: E731
    torch.testing.assert_close(compile_strict(fn)(x), fn(x), rtol=1e-13, atol=0)


def test_without_a_cxx_compiler_the_op_runs_through_aten_with_the_reason(tmp_path):
    script = (
        "import warnings, torch, ember\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    x = torch.randn(5)\n"
        "    out = ember.compile(lambda x: torch.i0(x.cos()) + 1)(x)\n"
        # cos is compiled: it may round its last bit differently from eager's.
        "torch.testing.assert_close(out, torch.i0(x.cos()) + 1, rtol=1e-6, atol=0)\n"
        "print([str(m.message) for m in w])\n")
    env = dict(os.environ, CXX="/nonexistent", EMBER_CACHE_DIR=str(tmp_path),
               PATH=os.path.dirname(sys.executable))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "aten.i0" in done.stdout and "no C++ compiler" in done.stdout, done.stdout
