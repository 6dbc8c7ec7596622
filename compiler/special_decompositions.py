"""Special functions torch-mlir cannot lower, written with ops it can, in float64 (rounded
to the input's float type at the end), with eager's values at poles, infinities and NaN.

    digamma(x)   -> shift x >= 0 up to z >= 6 (psi(z) = psi(z + 1) - 1/z), asymptotic
                    series log z - 1/2z - sum B_2k / (2k z^2k); x < 0 by reflection
                    psi(x) = psi(1 - x) - pi / tan(pi x); psi(+-0) = -+inf, psi(-n) = NaN
    erfcx(x)     -> exp(x^2) erfc(x) (erfc through the C library, scalar_library.py);
                    1/(x sqrt(pi)) (1 - 1/2x^2 + 3/4x^4) beyond x = 26, where exp overflows
    spherical_bessel_j0(x) -> sin(x) / x, 1 at 0, 0 at +-inf
    angle(x) (real x) -> pi where x < 0, else 0; NaN stays NaN
"""
import math

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


def _polygamma(n, x):
    return _digamma(x) if n == 0 else NotImplemented


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
}
