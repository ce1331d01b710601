"""Elementary functions that numba can vectorise, and a family's numpy code compiled
with them.

numba compiles ``math.exp`` and ``np.log`` to calls of the C library, one value at a
time: a loop that calls them stays scalar (numba's SIMD versions need Intel's SVML,
which pip's llvmlite does not link).  The compiled SMC engine (:mod:`dpbook.smc.compiled_smc`)
spends its time in a user's ``base_logpdf`` and ``base_ppf``, evaluated for every
particle and every latent value, so here are ``exp``, ``log``, ``log1p`` and
``expm1`` written with arithmetic and bit operations only, which LLVM turns into
vector instructions, each within a few units in the last place of numpy's (tested in
``tests/test_vmath.py``).  They use no fused multiply-add and no reassociation, so
their bits are the same on every x86-64 CPU, with or without AVX.

:func:`compile_scalar` compiles a function written for numpy arrays (a family's
``base_logpdf(self, z)``, say) for one float: ``np.exp``, ``np.log``, ``np.log1p``,
``np.expm1`` and the same names of ``math`` become these; ``np.where``,
``np.minimum``, ``np.maximum``, ``np.asarray`` and ``np.abs`` become their scalar
forms; every other name of numpy or math is numba's own (compiled, not vectorised).
"""

from __future__ import annotations

import functools
import math
import types

import numpy as np
from llvmlite import ir
from numba import njit
from numba import types as nbtypes
from numba.extending import intrinsic

__all__ = ["exp", "log", "log1p", "expm1", "ndtr", "ndtri", "logit", "expit",
           "compile_scalar", "exp_approx", "fma"]


@intrinsic
def int_bits_as_float(typingctx, x):
    """The bits of an int64 as a float64."""
    if x != nbtypes.int64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return nbtypes.float64(nbtypes.int64), codegen


@intrinsic
def float_bits_as_int(typingctx, x):
    """The bits of a float64 as an int64."""
    if x != nbtypes.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return nbtypes.int64(nbtypes.float64), codegen


@intrinsic
def fma(typingctx, x, y, z):
    """x y + z rounded once (LLVM's fma: the CPU's instruction, or an exact emulation
    where there is none), for arithmetic that must give the same bits on every CPU."""
    if not (x == y == z == nbtypes.float64):
        return None

    def codegen(context, builder, sig, args):
        return builder.fma(*args)

    return nbtypes.float64(nbtypes.float64, nbtypes.float64, nbtypes.float64), codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 = _LN2_HI + _LN2_LO, _LN2_HI n exact
_LN2_LO = 1.90821492927058770002e-10
_SQRT2 = 1.4142135623730951
_TINY = 2.2250738585072014e-308  # below: subnormal
_TWO54 = 18014398509481984.0
# 1/k! (Taylor series of exp to degree 13 on |r| <= ln2/2: truncation below 1e-17)
_E2, _E3, _E4, _E5, _E6, _E7, _E8, _E9, _E10, _E11, _E12, _E13 = (
    1.0 / math.factorial(k) for k in range(2, 14))
# 1/(2k + 1) (log m = 2 atanh s to s^19, |s| <= 0.172: truncation below 1e-17)
_L1, _L2, _L3, _L4, _L5, _L6, _L7, _L8, _L9 = (1.0 / (2 * k + 1) for k in range(1, 10))


@njit(inline="always", cache=True, error_model="numpy")
def _pow2(n):
    """2^n for an integer-valued float -1022 <= n <= 1023."""
    return int_bits_as_float((np.int64(n) + np.int64(1023)) << np.int64(52))


@njit(inline="always", cache=True, error_model="numpy")
def _poly_expm1(r):
    """e^r - 1 by its Taylor polynomial of degree 13 (Horner)."""
    p = (((((((((((_E13 * r + _E12) * r + _E11) * r + _E10) * r + _E9) * r + _E8) * r + _E7)
              * r + _E6) * r + _E5) * r + _E4) * r + _E3) * r + _E2) * r
    return (p + 1.0) * r


@njit(inline="always", cache=True, error_model="numpy")
def _poly_exp(r):
    return _poly_expm1(r) + 1.0


@njit(inline="always", cache=True, error_model="numpy")
def exp(x):
    """e^x: x = n ln2 + r, e^r by its Taylor polynomial; 2^n as two exact factors so
    that subnormal results round once."""
    xc = min(max(x, -746.0), 710.0)  # beyond, the result is 0 or inf anyway
    n = math.floor(xc * _LOG2E + 0.5)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = _poly_exp(r)
    n1 = math.floor(n * 0.5)
    out = p * _pow2(n1) * _pow2(n - n1)
    return x if x != x else out  # nan stays nan


@njit(inline="always", cache=True, error_model="numpy")
def log(x):
    """log x = e ln2 + log m, m in [sqrt(1/2), sqrt 2), log m = 2 atanh((m-1)/(m+1))."""
    sub = x < _TINY
    xs = x * _TWO54 if sub else x  # subnormals scaled to normal numbers
    bits = float_bits_as_int(xs)
    e = float((bits >> np.int64(52)) - np.int64(1023)) - (54.0 if sub else 0.0)
    m = int_bits_as_float((bits & np.int64(0xFFFFFFFFFFFFF)) | np.int64(0x3FF0000000000000))
    big = m > _SQRT2
    m = m * 0.5 if big else m
    e = e + 1.0 if big else e
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    p = ((((((((_L9 * s2 + _L8) * s2 + _L7) * s2 + _L6) * s2 + _L5) * s2 + _L4) * s2 + _L3)
          * s2 + _L2) * s2 + _L1) * s2 + 1.0
    out = (e * _LN2_HI + 2.0 * s * p) + e * _LN2_LO
    if x == 0.0:
        out = -math.inf
    elif not x >= 0.0:  # negative or nan
        out = math.nan
    elif x == math.inf:
        out = math.inf
    return out


@njit(inline="always", cache=True, error_model="numpy")
def log1p(x):
    """log(1 + x) with the rounding of 1 + x corrected (Goldberg 1991, Theorem 4)."""
    u = 1.0 + x
    d = u - 1.0
    out = log(u) + (x - d) / u
    if d == 0.0:
        out = x
    elif u == math.inf:
        out = math.inf
    elif u == 0.0:
        out = -math.inf
    return out


@njit(inline="always", cache=True, error_model="numpy")
def expm1(x):
    """e^x - 1: for |x| < ln2/2 its Taylor polynomial without the 1 (no cancellation),
    else exp(x) - 1."""
    small = _poly_expm1(x)
    return small if abs(x) < 0.34657359027997264 else exp(x) - 1.0


# Wichura's AS241 (PPND16, Appl. Statist. 1988): the normal quantile to about 1e-16
_A = (3.3871328727963666080, 1.3314166789178437745e2, 1.9715909503065514427e3,
      1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
      3.3430575583588128105e4, 2.5090809287301226727e3)
_B = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
      2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
      5.2264952788528545610e3)
_C = (1.42343711074968357734, 4.63033784615654529590, 5.76949722146069140550,
      3.64784832476320460504, 1.27045825245236838258, 2.41780725177450611770e-1,
      2.27238449892691845833e-2, 7.74545014278341407640e-4)
_D = (1.0, 2.05319162663775882187, 1.67638483018380384940, 6.89767334985100004550e-1,
      1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
      1.05075007164441684324e-9)
_E = (6.65790464350110377720, 5.46378491116411436990, 1.78482653991729133580,
      2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
      2.71155556874348757815e-5, 2.01033439929228813265e-7)
_F = (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1,
      1.48753612908506148525e-2, 7.86869131145613259100e-4, 1.84631831751005468180e-5,
      1.42151175831644588870e-7, 2.04426310338993978564e-15)


@njit(inline="always", cache=True, error_model="numpy")
def _ratio(n, d, x):
    """n(x)/d(x) for degree-7 coefficient tuples (Horner)."""
    num = ((((((n[7] * x + n[6]) * x + n[5]) * x + n[4]) * x + n[3]) * x + n[2]) * x
           + n[1]) * x + n[0]
    den = ((((((d[7] * x + d[6]) * x + d[5]) * x + d[4]) * x + d[3]) * x + d[2]) * x
           + d[1]) * x + d[0]
    return num / den


@njit(inline="always", cache=True, error_model="numpy")
def ndtri(p):
    """The standard normal quantile (AS241; both tails computed, then selected, so
    that a loop of it vectorises)."""
    q = p - 0.5
    central = q * _ratio(_A, _B, 0.180625 - q * q)
    r = math.sqrt(-log(min(p, 1.0 - p)))
    near = _ratio(_C, _D, r - 1.6)
    far = _ratio(_E, _F, r - 5.0)
    tail = near if r <= 5.0 else far
    tail = -tail if q < 0.0 else tail
    out = central if abs(q) <= 0.425 else tail
    if p == 0.0:
        out = -math.inf
    elif p == 1.0:
        out = math.inf
    elif not 0.0 < p < 1.0:
        out = math.nan
    return out


@njit(inline="always", cache=True, error_model="numpy")
def logit(p):
    """log(p / (1 - p)); near 1/2 as log1p((2p - 1)/(1 - p)), without cancellation."""
    mid = log1p((2.0 * p - 1.0) / (1.0 - p))
    far = log(p) - log1p(-p)
    return mid if 0.25 < p < 0.75 else far


@njit(inline="always", cache=True, error_model="numpy")
def expit(x):
    return 1.0 / (1.0 + exp(-x))


@njit(inline="always", cache=True, error_model="numpy")
def ndtr(x):
    """The standard normal cdf, 0.5 erfc(-x/sqrt 2) (scalar, not vectorised)."""
    return 0.5 * math.erfc(-x / _SQRT2)


@njit(inline="always", cache=True)
def _where(cond, a, b):
    return a if cond else b


@njit(inline="always", cache=True)
def _minimum(a, b):
    return a if a < b or a != a else b


@njit(inline="always", cache=True)
def _maximum(a, b):
    return a if a > b or a != a else b


@njit(inline="always", cache=True)
def _asarray(x, dtype=None):
    return float(x)


@njit(inline="always", cache=True)
def _abs(x):
    return abs(x)


_OVERRIDES = {"exp": exp, "log": log, "log1p": log1p, "expm1": expm1}
_NP_SCALAR = {"where": _where, "minimum": _minimum, "maximum": _maximum,
              "asarray": _asarray, "abs": _abs, "absolute": _abs, "fabs": _abs}


def _namespace(module, extra):
    ns = types.ModuleType(f"dpbook.vmath.{module.__name__}")
    ns.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    ns.__dict__.update(extra)
    return ns


_NP = _namespace(np, {**_OVERRIDES, **_NP_SCALAR})
_MATH = _namespace(math, _OVERRIDES)
# scipy.special: the functions above, and math's where it has them (scalar, not vector)
_SPECIAL = types.ModuleType("dpbook.vmath.special")
_SPECIAL.__dict__.update(ndtri=ndtri, ndtr=ndtr, logit=logit, expit=expit, erf=math.erf,
                         erfc=math.erfc, gammaln=math.lgamma, gamma=math.gamma)


@functools.cache  # one dispatcher per function: its out-of-line callers compile it once
def compile_scalar(func):
    """``func`` (a plain Python function of numpy code) compiled by numba for scalars,
    with numpy's and math's elementary functions replaced as the module docstring says.
    The globals ``np``/``numpy`` and ``math`` are swapped wherever they are bound to
    those modules; anything else (scipy, say) is left, so numba refuses it when the
    result is first compiled."""
    from scipy import special

    glb = dict(func.__globals__)
    for name, value in func.__globals__.items():
        if value is np:
            glb[name] = _NP
        elif value is math:
            glb[name] = _MATH
        elif value is special:
            glb[name] = _SPECIAL
    clone = types.FunctionType(func.__code__, glb, func.__name__, func.__defaults__,
                               func.__closure__)
    clone.__kwdefaults__ = func.__kwdefaults__
    clone.__qualname__ = func.__qualname__
    clone.__module__ = func.__module__
    return njit(inline="always", error_model="numpy")(clone)


# The MH test u < min(1, exp(d)) = exp(min(d, 0)) without a libm call (no SVML here,
# so math.exp would keep the loop scalar): exp(d) = 2^n exp(r), |r| <= ln2/2, exp(r) by
# its Taylor polynomial of degree 6, relative error below 2e-7 (tested).  A decision
# with u within a relative EXP_TOL of the approximation is taken again with
# math.exp, so every decision is exactly that of u < math.exp(d).  The kernels take it
# as an argument, read here at each call (a compiled constant would outlive a change).
EXP_TOL = 1e-6
_LN2 = 0.6931471805599453
# (multiply, not divide)
_C2, _C3, _C4, _C5, _C6 = 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720


@njit(cache=True, fastmath={"contract"})
def exp_approx(d):
    """exp(d) to a relative 2e-7 for -700 <= d <= 0 (FMAs allowed: only this value)."""
    n = np.int64(d * _LOG2E - 0.5)  # nearest integer (truncation, d <= 0)
    r = d - float(n) * _LN2
    # Estrin's scheme: a shorter dependency chain than Horner's
    r2 = r * r
    p = (1.0 + r) + r2 * ((_C2 + r * _C3) + r2 * ((_C4 + r * _C5) + r2 * _C6))
    return p * int_bits_as_float((n + np.int64(1023)) << np.int64(52))


@njit(cache=True, error_model="numpy")
def sum8(tmp, t):
    """tmp[0] + ... + tmp[t-1] in eight partial sums, whatever the vector width."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    t8 = t - t % 8
    for k in range(0, t8, 8):
        a0 += tmp[k]
        a1 += tmp[k + 1]
        a2 += tmp[k + 2]
        a3 += tmp[k + 3]
        a4 += tmp[k + 4]
        a5 += tmp[k + 5]
        a6 += tmp[k + 6]
        a7 += tmp[k + 7]
    acc = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
    for k in range(t8, t):
        acc += tmp[k]
    return acc
