"""ember-approximate-math: f32 `math.exp` / `math.erf` / `math.tanh` -> plain arith.

Lowered as is, they become calls of libm's scalar `expf` / `erff`, which stop LLVM from
vectorizing the loop around them (softmax, GELU, SiLU, tanh after math-expand-ops).
As arith ops, the loop widens. This torch-mlir build does not register upstream's
math-polynomial-approximation pass, so the same classic approximations are written here:
exp as in Cephes (range reduction by ln 2, degree-6 polynomial, 2^n through the exponent
bits; about 1 ulp), erf and tanh as Eigen's rational approximations (a few ulp).
"""
from torch_mlir import ir
from torch_mlir.dialects import arith, math

from ember.compiler.ir_walk import collect

PASS_NAME = "ember-approximate-math"

_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
             1.6666665459e-1, 5.0000001201e-1)
_EXP_HI = 88.72283935546875    # ln(FLT_MAX); above: +inf
_EXP_LO = -104.0               # below: 0 (exp(-104) is under half the smallest denormal)
_TANH_CLAMP = 7.90531110763549805   # tanh is 1.0f beyond
_TANH_ALPHA = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
               5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
               4.89352455891786e-03)
_TANH_BETA = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
              4.89352518554385e-03)
_ERF_ALPHA = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
              -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
              -1.60960333262415e-02)
_ERF_BETA = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
             -7.37332916720468e-03, -1.42647390514189e-02)


class _Builder:
    """Emits f32 (scalar or vector) arith at the current insertion point."""

    def __init__(self, ty):
        self.ty = ty
        self.int_ty = (ir.VectorType.get(ir.VectorType(ty).shape, ir.IntegerType.get_signless(32))
                       if isinstance(ty, ir.VectorType) else ir.IntegerType.get_signless(32))

    def const(self, v):
        if isinstance(self.ty, ir.VectorType):
            attr = ir.DenseElementsAttr.get_splat(self.ty, ir.FloatAttr.get(ir.F32Type.get(), v))
            return arith.constant(self.ty, attr)
        return arith.constant(self.ty, ir.FloatAttr.get(self.ty, v))

    def iconst(self, v):
        if isinstance(self.int_ty, ir.VectorType):
            attr = ir.DenseElementsAttr.get_splat(self.int_ty, ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), v))
            return arith.constant(self.int_ty, attr)
        return arith.constant(self.int_ty, v)

    def fma(self, a, b, c):
        return math.fma(a, b, c)

    def horner(self, x, coeffs):
        acc = self.const(coeffs[0])
        for c in coeffs[1:]:
            acc = self.fma(acc, x, self.const(c))
        return acc

    def cmp(self, pred, a, b):
        return arith.cmpf(getattr(arith.CmpFPredicate, pred), a, b)


def _exp(b, x):
    clamped = arith.minimumf(arith.maximumf(x, b.const(_EXP_LO)), b.const(_EXP_HI))
    n = math.floor(b.fma(clamped, b.const(_LOG2E), b.const(0.5)))
    r = b.fma(n, b.const(-_LN2_HI), clamped)
    r = b.fma(n, b.const(-_LN2_LO), r)
    r2 = arith.mulf(r, r)
    poly = b.fma(b.horner(r, _EXP_POLY), r2, arith.addf(r, b.const(1.0)))
    # 2^n as 2^h * 2^(n-h), h = n/2: both factors are normal floats for n in [-150, 128],
    # so results near FLT_MAX and in the denormal range come out right.
    ni = arith.fptosi(b.int_ty, n)
    h = arith.shrsi(ni, b.iconst(1))
    result = arith.mulf(arith.mulf(poly, _pow2(b, h)), _pow2(b, arith.subi(ni, h)))
    result = arith.select(b.cmp("OLT", x, b.const(_EXP_LO)), b.const(0.0), result)
    result = arith.select(b.cmp("OGT", x, b.const(_EXP_HI)), b.const(float("inf")), result)
    return arith.select(b.cmp("UNO", x, x), x, result)  # NaN stays NaN


def _pow2(b, k):
    """2^k for an i32 k in [-126, 127], built in the exponent field."""
    return arith.bitcast(b.ty, arith.shli(arith.addi(k, b.iconst(127)), b.iconst(23)))


def _tanh(b, x):
    clamped = arith.minimumf(arith.maximumf(x, b.const(-_TANH_CLAMP)), b.const(_TANH_CLAMP))
    x2 = arith.mulf(clamped, clamped)
    p = arith.mulf(clamped, b.horner(x2, _TANH_ALPHA))
    q = b.horner(x2, _TANH_BETA)
    result = arith.divf(p, q)
    tiny = b.cmp("OLT", math.absf(x), b.const(0.0004))  # tanh(x) = x to f32 precision
    return arith.select(tiny, x, result)


def _erf(b, x):
    clamped = arith.minimumf(arith.maximumf(x, b.const(-4.0)), b.const(4.0))
    x2 = arith.mulf(clamped, clamped)
    p = arith.mulf(clamped, b.horner(x2, _ERF_ALPHA))
    q = b.horner(x2, _ERF_BETA)
    return arith.divf(p, q)


_APPROXIMATIONS = {"math.exp": _exp, "math.erf": _erf, "math.tanh": _tanh}


def _is_f32(ty):
    elem = ir.VectorType(ty).element_type if isinstance(ty, ir.VectorType) else ty
    return isinstance(elem, ir.F32Type)


def approximate_math(module_op, pass_=None):
    ops = collect(module_op, lambda o: o.name in _APPROXIMATIONS)
    for op in ops:
        x = op.operands[0]
        if not _is_f32(x.type):
            continue  # f64 keeps libm precision
        with ir.InsertionPoint(op), op.location:
            value = _APPROXIMATIONS[op.name](_Builder(x.type), x)
        op.results[0].replace_all_uses_with(value)
        op.erase()
