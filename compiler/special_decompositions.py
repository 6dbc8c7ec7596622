"""Special functions torch-mlir cannot lower, written with ops it can, in float64 (rounded
to the input's float type at the end), with eager's values at poles, infinities and NaN.

    digamma(x)   -> shift x >= 0 up to z >= 6 (psi(z) = psi(z + 1) - 1/z), asymptotic
                    series log z - 1/2z - sum B_2k / (2k z^2k); x < 0 by reflection
                    psi(x) = psi(1 - x) - pi / tan(pi x); psi(+-0) = -+inf, psi(-n) = NaN
    erfcx(x)     -> exp(x^2) erfc(x) (erfc through the C library, scalar_library.py);
                    1/(x sqrt(pi)) (1 - 1/2x^2 + 3/4x^4) beyond x = 26, where exp overflows
    spherical_bessel_j0(x) -> sin(x) / x, 1 at 0, 0 at +-inf
    angle(x) (real x) -> pi where x < 0, else 0; NaN stays NaN
    zeta(x, q)   -> Hurwitz zeta as torch computes it (Cephes): sum_{k<N} (q+k)^-x, then
                    the Euler-Maclaurin tail at w = q+N with (2j)!/B_2j; inf at x = 1 and
                    at non-positive integer q, NaN for x < 1
    polygamma(n, x) -> (-1)^(n+1) n! zeta(n + 1, x) (n >= 2; n = 1 as torch's trigamma,
                    in the input's type; n = 0 is digamma)
"""
import math
from fractions import Fraction

import torch

aten = torch.ops.aten


def _float_dtype(x):
    return x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()


def _digamma(x):
    if x.dtype.is_complex:
        return NotImplemented
    d = x.to(torch.float64)
    reflect = d < 0
    z = torch.where(reflect, 1 - d, d)
    shifted = torch.zeros_like(z)
    for _ in range(6):
        small = z < 6
        shifted = shifted + torch.where(small, 1 / z, 0.0)
        z = torch.where(small, z + 1, z)
    w = 1 / (z * z)
    series = w * (1 / 12 - w * (1 / 120 - w * (1 / 252 - w * (1 / 240 - w * (
        1 / 132 - w * (691 / 32760 - w / 12))))))
    out = torch.log(z) - 0.5 / z - series - shifted
    out = torch.where(reflect, out - math.pi / torch.tan(math.pi * d), out)
    pole = reflect & (d == torch.floor(d))  # negative integers and -inf
    out = torch.where(pole, float("nan"), out)
    zero = torch.where(torch.signbit(d), float("inf"), float("-inf"))
    out = torch.where(d == 0, zero, out)
    out = torch.where(d == float("inf"), float("inf"), out)
    return out.to(_float_dtype(x))


_BERNOULLI = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30),
              Fraction(5, 66), Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510),
              Fraction(43867, 798), Fraction(-174611, 330), Fraction(854513, 138),
              Fraction(-236364091, 2730)]  # B_2 .. B_24
_TAIL = [float(math.factorial(2 * j + 2) / b) for j, b in enumerate(_BERNOULLI)]
_TERMS = 33  # q + _TERMS >= 9 (Cephes' tail start) for q > -24


def _hurwitz_zeta(x, q):
    """float64 q; x a float64 tensor (broadcast with q) or a Python number. A number's
    special cases are decided here: torch-mlir's folding of a where-chain on a constant
    splat condition returned the NaN branch for polygamma (seen on torch-mlir 20261001)."""
    total = torch.pow(q, -x)
    for k in range(1, _TERMS):
        total = total + torch.pow(q + k, -x)
    w = q + (_TERMS - 1)  # the last term's base: its term is in the sum already
    b = torch.pow(w, -x)
    total = total + b * w / (x - 1) - 0.5 * b
    a, k = torch.ones_like(total), 0.0
    for coefficient in _TAIL:
        a = a * (x + k)
        b = b / w
        total = total + a * b / coefficient
        k += 1
        a = a * (x + k)
        b = b / w
        k += 1
    nonpositive = q <= 0
    if isinstance(x, torch.Tensor):
        total = torch.where(nonpositive & (x != torch.floor(x)), float("nan"), total)
    elif x != math.floor(x):
        total = torch.where(nonpositive, float("nan"), total)
    total = torch.where(nonpositive & (q == torch.floor(q)), float("inf"), total)
    if not isinstance(x, torch.Tensor):
        return total if x > 1 else torch.full_like(total, float("inf") if x == 1 else float("nan"))
    total = torch.where(x < 1, float("nan"), total)
    return torch.where(x == 1, float("inf"), total)


def _as_float64(v, like):
    if isinstance(v, torch.Tensor):
        return v.to(torch.float64)
    return torch.full_like(like, v, dtype=torch.float64)


def _zeta(x, q):
    like = x if isinstance(x, torch.Tensor) else q
    if like.dtype.is_complex:
        return NotImplemented
    out_dtype = torch.result_type(x, q)
    if not out_dtype.is_floating_point:
        out_dtype = torch.get_default_dtype()
    return _hurwitz_zeta(_as_float64(x, like), _as_float64(q, like)).to(out_dtype)


def _trigamma(x):
    """polygamma(1, x) the way torch computes it (calc_trigamma, in the input's type):
    reflection below 1/2, six recurrence steps, then the asymptotic series."""
    t = x.to(_float_dtype(x))
    reflect = t < 0.5
    sign = torch.where(reflect, -1.0, 1.0).to(t.dtype)
    sin_pi = torch.sin(math.pi * t)
    out = torch.where(reflect, -(math.pi * math.pi) / (sin_pi * sin_pi), 0.0).to(t.dtype)
    y = torch.where(reflect, 1 - t, t)
    for _ in range(6):
        out = out + 1 / (y * y)
        y = y + 1
    ixx = 1 / (y * y)
    out = out + (1 + 1 / (2 * y) + ixx * (1 / 6 - ixx * (1 / 30 - ixx * (1 / 42)))) / y
    return sign * out


def _polygamma(n, x):
    if n == 0:
        return _digamma(x)
    if n == 1 and not x.dtype.is_complex:
        return _trigamma(x)
    if x.dtype.is_complex:
        return NotImplemented
    sign = 1.0 if n % 2 else -1.0
    d = x.to(torch.float64)
    out = sign * math.factorial(n) * _hurwitz_zeta(float(n + 1), d)
    return out.to(_float_dtype(x))


def _erfcx(x):
    d = x.to(torch.float64)
    near = torch.exp(d * d) * torch.erfc(d)
    w = 1 / (d * d)
    far = (1 - w * (0.5 - 0.75 * w)) / (d * math.sqrt(math.pi))
    out = torch.where(d > 26, far, near)
    return out.to(_float_dtype(x))


def _spherical_bessel_j0(x):
    d = x.to(torch.float64)
    out = torch.where(d == 0, 1.0, torch.sin(d) / d)
    out = torch.where(torch.isinf(d), 0.0, out)
    return out.to(_float_dtype(x))


def _angle(x):
    if x.dtype.is_complex:
        return NotImplemented
    d = x.to(_float_dtype(x))
    return torch.where(torch.isnan(d), d, torch.where(d < 0, math.pi, 0.0).to(d.dtype))


SPECIAL_DECOMPOSITIONS = {
    aten.digamma.default: _digamma, aten.special_digamma.default: _digamma,
    aten.polygamma.default: _polygamma,
    aten.special_erfcx.default: _erfcx,
    aten.special_spherical_bessel_j0.default: _spherical_bessel_j0,
    aten.angle.default: _angle,
    aten.special_zeta.default: _zeta, aten.special_zeta.self_scalar: _zeta,
    aten.special_zeta.other_scalar: _zeta,
}
