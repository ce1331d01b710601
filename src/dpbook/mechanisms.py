"""The privacy mechanism: clip to [l, r], then add noise scaled by the width.

Paper, eq. (2) and (10) with s_t = T_l^r (Section 5):

    Y = T_l^r(X) + (r - l) V,   T_l^r(x) = min(max(x, l), r),   V ~ Laplace(1/eps),

so the noise has scale b = (r - l)/eps and variance 2 b^2 (Theorem 2: eps-DP,
because the sensitivity of T_l^r is r - l).  The authors' original MATLAB code drew
V with a sampler parameterised by the standard deviation (scale b/sqrt(2)); dpbook
draws the paper's Laplace(1/eps).

The Gaussian mechanism (V ~ N(0, 1/eps^2), Section 2 and 7) is provided too.
"""

from __future__ import annotations

import numpy as np

from .validation import check_eps, check_finite, check_interval

MECHANISMS = ("laplace", "gaussian")


def clip(x, l, r):
    """T_l^r(x) = min(max(x, l), r) (Section 5)."""
    return np.minimum(np.maximum(x, l), r)


def noise_scale(l, r, eps):
    """Scale of the additive noise, Delta s / eps = (r - l)/eps (eq. 2)."""
    return (np.asarray(r, float) - np.asarray(l, float)) / eps


def check_mechanism(mechanism: str) -> str:
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown mechanism {mechanism!r}; choose one of {', '.join(MECHANISMS)}")
    return mechanism


def release(x, l, r, eps, rng: np.random.Generator, mechanism: str = "laplace"):
    """Release Y = T_l^r(x) + (r - l) V (eq. 10), vectorised over x, l, r.

    ``rng`` is a ``numpy.random.Generator``; V ~ Laplace(scale 1/eps) for the Laplace
    mechanism, V ~ N(0, 1/eps^2) for the Gaussian one.
    """
    eps = check_eps(eps)
    check_mechanism(mechanism)
    x = check_finite("x", x)
    l, r = check_interval(l, r)
    c = clip(x, l, r)
    b = noise_scale(l, r, eps)
    if mechanism == "laplace":
        v = rng.laplace(0.0, 1.0, size=np.shape(c))
    else:
        v = rng.standard_normal(size=np.shape(c))
    return c + b * v


def laplace_logpdf(v, scale):
    """log Laplace(v; scale) = -|v|/scale - log(2 scale)."""
    return -np.abs(v) / scale - np.log(2.0 * scale)


def noise_logpdf(y, c, l, r, eps, mechanism: str = "laplace"):
    """log Laplace(y - s(x); Delta s/eps), the noise factor of eq. (5), given T_l^r(X) = c."""
    b = noise_scale(l, r, eps)
    if mechanism == "laplace":
        return laplace_logpdf(np.asarray(y) - c, b)
    z = (np.asarray(y) - c) / b
    return -0.5 * z * z - np.log(b) - 0.5 * np.log(2 * np.pi)
