"""The privacy mechanism: clip to [l, r], then add noise scaled by the width.

Paper, eq. (2) and (10) with s_t = T_l^r (Section 5):

    Y = T_l^r(X) + (r - l) V,   T_l^r(x) = min(max(x, l), r),   V ~ Laplace(1/eps),

so the noise has scale b = (r - l)/eps and variance 2 b^2 (Theorem 2: eps-DP,
because the sensitivity of T_l^r is r - l).  The authors' original MATLAB code drew
V with a sampler parameterised by the standard deviation (scale b/sqrt(2)); dpbook
draws the paper's Laplace(1/eps).

The Gaussian mechanism (V ~ N(0, 1/eps^2), Section 2 and 7) is provided too.  A
:class:`Mechanism` object carries everything the estimators need about the noise (log
density, cdf, sampler); :func:`get_mechanism` maps a name to it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from dpbook.validation import (
    as_generator,
    check_eps,
    check_finite,
    check_interval,
    check_one_interval,
    missing_method,
)

MECHANISMS = ("laplace", "gaussian")


def clip(x, l, r):
    """T_l^r(x) = min(max(x, l), r) (Section 5)."""
    return np.minimum(np.maximum(x, l), r)


def noise_scale(l, r, eps):
    """Scale of the additive noise, Delta s / eps = (r - l)/eps (eq. 2)."""
    return (np.asarray(r, float) - np.asarray(l, float)) / eps


def check_mechanism(mechanism) -> str:
    if isinstance(mechanism, Mechanism):
        return mechanism.name
    if not isinstance(mechanism, str) or mechanism not in _MECHANISM_OBJECTS:
        raise ValueError(f"unknown mechanism {mechanism!r}; choose one of "
                         f"{', '.join(available_mechanisms())}")
    return mechanism


def release(x, l, r, eps, rng, mechanism: str = "laplace"):
    """Release Y = T_l^r(x) + (r - l) V (eq. 10), vectorised over x, l, r.

    ``rng``: a ``numpy.random.Generator`` (or what ``numpy.random.default_rng`` accepts,
    e.g. an int seed); V ~ Laplace(scale 1/eps) for the Laplace mechanism,
    V ~ N(0, 1/eps^2) for the Gaussian one.
    """
    rng = as_generator(rng)
    eps = check_eps(eps)
    check_mechanism(mechanism)
    x = check_finite("x", x)
    l, r = check_interval(l, r)
    c = clip(x, l, r)
    b = noise_scale(l, r, eps)
    return c + b * get_mechanism(mechanism).sample(rng, size=np.shape(c))


def release_one(x: float, l: float, r: float, eps: float, rng: np.random.Generator,
                mechanism="laplace") -> float:
    """One individual's release Y = T_l^r(x) + (r - l) V (eq. 10) for floats x, l, r.

    The same arithmetic and the same draw from ``rng`` as :func:`release` with scalar
    arguments (so the same value, bit for bit), without its array checks: the online
    loop (Algorithm 1) calls it once per individual.  Both are seeded samplers for
    simulation and reproduction: numpy's noise on doubles is not floating-point safe
    (Mironov 2012); a deployment draws with
    :func:`dpbook.privacy.individual.private_release` (OpenDP).
    """
    l, r = check_one_interval(l, r)
    if not isinstance(rng, np.random.Generator):
        rng = as_generator(rng)
    c = min(max(x, l), r)
    v = get_mechanism(mechanism).sample(rng, size=())
    return float(c + (r - l) / eps * v)


def laplace_logpdf(v, scale):
    """log Laplace(v; scale) = -|v|/scale - log(2 scale)."""
    return -np.abs(v) / scale - np.log(2.0 * scale)


def noise_logpdf(y, c, l, r, eps, mechanism: str = "laplace"):
    """log Laplace(y - s(x); Delta s/eps), the noise factor of eq. (5), given T_l^r(X) = c."""
    return get_mechanism(mechanism).logpdf(np.asarray(y) - c, noise_scale(l, r, eps))


# ----------------------------------------------------------------- mechanism objects
class Mechanism:
    """An additive mechanism: Y = T_l^r(X) + b V with b = (r - l)/eps (eq. 2, 10).

    Only the distribution of the standard noise V changes between mechanisms
    (Section 7: "all that changes throughout is the conditional distribution of Y_t
    given x_t, theta, s_t, eps").  Every method takes the noise value v = y - T(x)
    and the scale b, vectorised.
    """

    name = ""
    kink = False  # density not differentiable at 0 (quadrature splits there)
    norm = 1  # the sensitivity of a box [l, r] in d dimensions: the L1 norm of r - l

    def sensitivity(self, l, r):
        """The sensitivity of the clip T_l^r: r - l for an interval; for a box (arrays
        l, r along the last axis), the ``norm`` of r - l: L1 for Laplace noise (so one
        release of every component at scale sensitivity / eps is eps-DP), L2 for
        Gaussian."""
        w = np.asarray(r, float) - np.asarray(l, float)
        return w if w.ndim == 0 else np.linalg.norm(w, ord=self.norm, axis=-1)

    def logpdf(self, v, scale):
        raise missing_method(self, "logpdf")

    def pdf(self, v, scale):
        return np.exp(self.logpdf(v, scale))

    def cdf(self, v, scale):
        raise missing_method(self, "cdf")

    def sample(self, rng: np.random.Generator, size=None):
        """Standard noise V (scale 1)."""
        raise missing_method(self, "sample")

    def variance(self, scale):
        raise missing_method(self, "variance")

    def tail(self, scale, tol=1e-16):
        """A half-width h with P(|b V| > h) < tol (for quadrature ranges)."""
        raise missing_method(self, "tail")

    def __repr__(self):
        return f"<mechanism {self.name}>"


class LaplaceMechanism(Mechanism):
    """V ~ Laplace(1/eps) in the paper's notation, i.e. noise Laplace(scale b): eps-DP."""

    name = "laplace"
    kink = True

    def logpdf(self, v, scale):
        return laplace_logpdf(v, scale)

    def cdf(self, v, scale):
        z = np.asarray(v, float) / scale
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)),
                        1.0 - 0.5 * np.exp(-np.maximum(z, 0.0)))

    def sample(self, rng, size=None):
        return rng.laplace(0.0, 1.0, size=size)

    def variance(self, scale):
        return 2.0 * np.asarray(scale, float) ** 2

    def tail(self, scale, tol=1e-16):
        return np.asarray(scale, float) * float(-np.log(tol))


class GaussianMechanism(Mechanism):
    """Noise N(0, b^2), b = (r - l)/eps (Gaussian mechanism, Sections 2 and 7)."""

    name = "gaussian"
    norm = 2

    def logpdf(self, v, scale):
        z = np.asarray(v, float) / scale
        return -0.5 * z * z - np.log(scale) - 0.5 * np.log(2 * np.pi)

    def cdf(self, v, scale):
        from scipy.special import ndtr

        return ndtr(np.asarray(v, float) / scale)

    def sample(self, rng, size=None):
        return rng.standard_normal(size=size)

    def variance(self, scale):
        return np.asarray(scale, float) ** 2

    def tail(self, scale, tol=1e-16):
        return np.asarray(scale, float) * float(np.sqrt(-2.0 * np.log(tol)))


_MECHANISM_OBJECTS = {"laplace": LaplaceMechanism(), "gaussian": GaussianMechanism()}


def register_mechanism(mechanism: Mechanism) -> None:
    """Make a mechanism available by its name everywhere a name is taken (the command
    line's ``--mechanism``, the experiment's configuration).  A Mechanism object can
    also be passed directly to every algorithm without registering it."""
    if not isinstance(mechanism, Mechanism) or not mechanism.name:
        raise ValueError("register_mechanism takes a Mechanism instance with a name")
    _MECHANISM_OBJECTS[mechanism.name] = mechanism


def unregister_mechanism(name: str) -> None:
    """Remove a registered mechanism (the shipped ones cannot be removed)."""
    if name in MECHANISMS:
        raise ValueError(f"{name!r} is a shipped mechanism")
    _MECHANISM_OBJECTS.pop(name, None)


def available_mechanisms() -> tuple:
    """The names of the shipped and registered mechanisms."""
    return tuple(_MECHANISM_OBJECTS)


def get_mechanism(mechanism) -> Mechanism:
    """The Mechanism object for a name ('laplace', 'gaussian') or a Mechanism."""
    if isinstance(mechanism, Mechanism):
        return mechanism
    return _MECHANISM_OBJECTS[check_mechanism(mechanism)]


# The shipped mechanisms' codes in compiled loops (their noise density written out);
# any other Mechanism object goes through its own vectorised logpdf.
KIND = {LaplaceMechanism: 0, GaussianMechanism: 1}


@njit(cache=True, error_model="numpy")
def noise_loglik(kind, v, invb):
    """log g_b(v) up to its normalising constant (the same for every particle at a
    step): -|v|/b (Laplace) or -(v/b)^2/2 (Gaussian)."""
    z = v * invb
    return -abs(z) if kind == 0 else -0.5 * z * z
