"""The Student-t cdf, log-cdf and quantile function, written for numba: the Student-t
family's primitives (:mod:`dpbook.model.families.student_t`), the same code on numpy
arrays (numba ufuncs, as ``scipy.special.stdtr``/``stdtrit``) and inside the compiled
engines (called for one value), so that the family runs compiled without a second
implementation beside scipy's.

For t <= 0, F(t) = I_x(nu/2, 1/2)/2 with x = nu/(nu + t^2) (Abramowitz & Stegun 26.7.1,
26.5.27), I the regularized incomplete beta, evaluated by its continued fraction
(Numerical Recipes' ``betacf``, the modified Lentz method) in x, or near the centre
(x above (a + 1)/(a + b + 2), where that converges slowly) by the symmetry
I_x(a, b) = 1 - I_{1-x}(b, a), so that both log F(t) and 1/2 - F(t) are accurate
relatively: the lower tail to a far l (the clipped mass P(X < l) of eq. 7), and the
centre for the quantiles near 1/2.  x and 1 - x are formed from t^2/nu by log1p, and
log B(nu/2, 1/2) from a Stirling series of log Gamma(a + 1/2) - log Gamma(a) for
large a, not a difference of two large lgammas.  F(t) for t > 0 is 1 - F(-t).

The quantile: Newton's method on log F in log|t| (the tails, where log F is nearly
linear in log|t|) or on 1/2 - F in t (near the centre, where 1/2 - p is exact), from
the better of two starts: the tail's power law F(t) ~ nu^(nu/2 - 1) |t|^-nu / B(nu/2,
1/2), an upper bound on |t|, and the Cornish-Fisher expansion in the normal quantile.
Accuracy (tests/test_tdist.py): within 1e-12 relative of scipy over df in [0.1, 1e3]
and u in [1e-300, 1 - 1e-16] where scipy's own values are right (its ``stdtrit``
returns inf or 2e153 for df <= 5 in the far tails, where these are checked by the
round trip F(ppf(u)) = u).  The continued fraction's rounding grows with df: the cdf
is within 1e-11 relative at df = 1e5 and 5e-9 at the family's limit 1e8.
"""

from __future__ import annotations

import math

from numba import njit, vectorize

from dpbook import vmath

_LOG_SQRT_PI = 0.5 * math.log(math.pi)
_TINY = 1e-300
_EPS = 1e-16
_MAXIT = 100000


@njit(cache=True, error_model="numpy")
def _lgamma_half_ratio(a):
    """log Gamma(a + 1/2) - log Gamma(a), without the cancellation of the difference
    for large a (Stirling's series of both: truncation below 2e-16 for a >= 20)."""
    if a < 20.0:
        return math.lgamma(a + 0.5) - math.lgamma(a)
    h = a + 0.5
    ia, ih = 1.0 / a, 1.0 / h
    ia2, ih2 = ia * ia, ih * ih
    # sum B_2k / (2k (2k - 1) z^(2k - 1)), k = 1..4, at z = a + 1/2 minus at z = a
    s = ((((-1.0 / 1680.0 * ih2 + 1.0 / 1260.0) * ih2 - 1.0 / 360.0) * ih2 + 1.0 / 12.0) * ih
         - (((-1.0 / 1680.0 * ia2 + 1.0 / 1260.0) * ia2 - 1.0 / 360.0) * ia2 + 1.0 / 12.0) * ia)
    # (h - 1/2) log h - h - ((a - 1/2) log a - a) = a log1p(1/(2a)) + log(a)/2 - 1/2
    return a * math.log1p(0.5 * ia) + 0.5 * math.log(a) - 0.5 + s


@njit(cache=True, error_model="numpy")
def _betacf(a, b, x):
    """The continued fraction of I_x(a, b) (Numerical Recipes' betacf, modified Lentz),
    converging fast for x < (a + 1)/(a + b + 2)."""
    qab = a + b
    qap = a + 1.0
    qam = a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = _TINY if abs(d) < _TINY else d
    d = 1.0 / d
    h = d
    for m in range(1, _MAXIT):
        m2 = 2.0 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = _TINY if abs(d) < _TINY else d
        c = 1.0 + aa / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = _TINY if abs(d) < _TINY else d
        c = 1.0 + aa / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        de = d * c
        h *= de
        if abs(de - 1.0) < _EPS:
            break
    return h


_LN2 = math.log(2.0)


@njit(cache=True, error_model="numpy")
def _log_beta_half(a):
    """log B(a, 1/2)."""
    return _LOG_SQRT_PI - _lgamma_half_ratio(a)


@njit(cache=True, error_model="numpy")
def _lower(nu, w, lnb):
    """(log F(-w), 1/2 - F(-w)) for w >= 0, F the t_nu cdf."""
    return _lower_s(nu, math.log(w), lnb) if w > 1e150 else _lower_w(nu, w, lnb)


@njit(cache=True, error_model="numpy")
def _lower_s(nu, s, lnb):
    """:func:`_lower` at w = exp(s), for any s (w^2 would overflow beyond 1e154)."""
    if s < 345.0:
        return _lower_w(nu, math.exp(s), lnb)
    a = 0.5 * nu
    lx = math.log(nu) - 2.0 * s - math.log1p(nu * math.exp(-2.0 * s))
    logf = a * lx - lnb + math.log(_betacf(a, 0.5, math.exp(lx)) / a) - _LN2
    return logf, 0.5 - math.exp(logf)


@njit(cache=True, error_model="numpy")
def _lower_w(nu, w, lnb):
    """F(-w) = I_x(nu/2, 1/2)/2, x = nu/(nu + w^2), by the continued fraction in x or
    (near the centre, where it would converge slowly) in 1 - x, so that both log F and
    1/2 - F are accurate relatively."""
    a = 0.5 * nu
    ww = w * w
    lx = -math.log1p(ww / nu)
    l1x = -math.log1p(nu / ww) if ww > 0.0 else -math.inf
    x = nu / (nu + ww)
    lfront = a * lx + 0.5 * l1x - lnb  # log of x^a (1 - x)^(1/2) / B(a, 1/2)
    if x < (a + 1.0) / (a + 2.5):
        logf = lfront + math.log(_betacf(a, 0.5, x) / a) - _LN2
        return logf, 0.5 - math.exp(logf)
    g = math.exp(lfront) * _betacf(0.5, a, ww / (nu + ww))  # I_{1-x}(1/2, a)/2
    return math.log(0.5 - g), g


@njit(cache=True, error_model="numpy")
def _cdf(nu, t):
    """P(T <= t), T ~ t_nu."""
    if t != t:
        return t
    lnb = _log_beta_half(0.5 * nu)
    lf, g = _lower(nu, abs(t), lnb)
    return math.exp(lf) if t < 0.0 else 0.5 + g


@njit(cache=True, error_model="numpy")
def _logcdf(nu, t):
    """log P(T <= t), finite far into the lower tail."""
    if t != t:
        return t
    lnb = _log_beta_half(0.5 * nu)
    lf, g = _lower(nu, abs(t), lnb)
    return lf if t < 0.0 else math.log1p(-math.exp(lf))


@njit(cache=True, error_model="numpy")
def _ppf(nu, u):
    """The quantile: t with P(T <= t) = u."""
    if not 0.0 < u < 1.0:
        if u == 0.0:
            return -math.inf
        return math.inf if u == 1.0 else math.nan
    if u == 0.5:
        return 0.0
    p = min(u, 1.0 - u)  # exact
    q = 0.5 - p  # exact
    lp = math.log(p)
    lnb = _log_beta_half(0.5 * nu)
    lk = -lnb - 0.5 * math.log(nu)  # log of the density at 0
    # starts: the tail's power law (|t| never below the root) and Cornish-Fisher
    s_tail = 0.5 * math.log(nu) - (math.log(nu) + lnb + lp) / nu
    z = vmath.ndtri(p)
    z2 = z * z
    t_cf = z * (1.0 + (z2 + 1.0) / (4.0 * nu) + ((5.0 * z2 + 16.0) * z2 + 3.0) / (96.0 * nu * nu)
                + (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / (384.0 * nu * nu * nu))
    s = math.log(-t_cf) if 0.0 < -t_cf and math.log(-t_cf) < s_tail else s_tail
    if p < 0.3:  # Newton in s = log w on log F(-w) = log p
        for _ in range(200):
            lf, g = _lower_s(nu, s, lnb)
            # log(w f(-w)), f the density, without overflow
            if s > 20.0:
                l1 = 2.0 * s - math.log(nu) + math.log1p(nu * math.exp(-2.0 * s))
            else:
                l1 = math.log1p(math.exp(2.0 * s) / nu)
            lwf = s + lk - 0.5 * (nu + 1.0) * l1
            step = (lf - lp) / -math.exp(lwf - lf)
            step = max(min(step, 5.0), -5.0)
            s -= step
            if abs(step) < 1e-9:
                break
        w = math.exp(s)
    else:  # Newton in w on 1/2 - F(-w) = 1/2 - p
        w = math.exp(s)
        for _ in range(200):
            lf, g = _lower(nu, w, lnb)
            lpdf = lk - 0.5 * (nu + 1.0) * math.log1p(w * w / nu)
            step = (g - q) / math.exp(lpdf)
            wn = w - step
            w = wn if wn > 0.0 else 0.5 * w
            if abs(step) < 1e-9 * w:
                break
    return -w if u < 0.5 else w


# numba ufuncs (compiled on first use, cached on disk): numpy arrays broadcast as in
# scipy.special; inside compiled code they are called for one value
stdtr = vectorize(cache=True)(_cdf)
log_stdtr = vectorize(cache=True)(_logcdf)
stdtrit = vectorize(cache=True)(_ppf)
