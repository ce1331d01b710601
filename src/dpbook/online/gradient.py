"""The online gradient method that Section 7 of the paper suggests as an alternative to
SMC for long streams: a Robbins-Monro point estimate of theta, updated with the score
of each release, and intervals placed at the current estimate.

For a location-scale family with a base interval (a, b) (default: the symmetric one
with the largest det F, :func:`d_optimal_symmetric`), release t is asked for
[m + a c, m + b c] at the current estimate theta = (m, c), and the
estimate takes one Fisher-scoring step on the unconstrained scale u = (m, log c):

    u_t = u_{t-1} + gamma_t I_u(theta_{t-1})^{-1} grad_u log p(y_t | theta_{t-1}),

with gamma_t = 1 / (t + t0), each step clipped to a trust region (at most one scale c
in m and a factor e^0.5 in c).  The score is exact (Fisher's identity, Appendix C: closed
form for normal/Laplace, quadrature otherwise), and by Theorem 3 the information of the
interval at theta is the base one scaled, F_theta = F_{a,b}(0, 1) / c^2, so the step
costs one score evaluation.  Steps 1/t with the inverse information give an
asymptotically efficient estimate (Sakrison 1965), about what the posterior mean
achieves, at O(1) cost per individual.  There is no posterior: no credible intervals,
and no Thompson sampling, so the interval always sits at the current estimate (no
exploration; chapter 9 measures what that costs).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbook.fisher import fisher_information
from dpbook.likelihood import normal_laplace, quadrature
from dpbook.likelihood.normal_laplace import normal_cdf_diff
from dpbook.model.families import as_family
from dpbook.model.mechanisms import check_mechanism
from dpbook.smc.algorithm import History
from dpbook.validation import check_eps, check_interval, check_release


def d_optimal_symmetric(eps, family=None, mechanism="laplace"):
    """The symmetric base interval [-A, A] that maximises det F_{-A,A}(0, 1) (A on a
    grid of 200 values from 0.05 to 5): informative about both m and c, which a point
    estimate without exploration needs (the F_mumu-optimal interval of eq. 13 is nearly
    blind to c at small eps)."""
    A = np.geomspace(0.05, 5.0, 200)
    F = fisher_information(-A, A, eps, family=family, mechanism=mechanism).F
    best = float(A[np.argmax(np.linalg.det(F))])
    return -best, best


_SQRT2 = math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)


@njit(cache=True)
def _phi(z):
    return _INV_SQRT2PI * math.exp(-0.5 * z * z)


@njit(cache=True)
def _Phi(z):
    return 0.5 * math.erfc(-z / _SQRT2)


@njit(cache=True)
def _score_normal_laplace(y, l, r, b, m, s):
    """(ok, d/dm, d/ds) of log p(y | m, s) for the normal family and the Laplace
    mechanism: the derivatives of the density's closed form (the four terms of
    :func:`dpbook.likelihood.normal_laplace.log_density`, in linear space),

        p 2b = Phi(zl) e^{-|y-l|/b} + Phi(-zr) e^{-|y-r|/b}
               + e^{dm + h} [Phi(zu - k) - Phi(zl - k)] + e^{h - dm} [Phi(-zu - k) - Phi(-zr - k)],

    z. = (. - m)/s, u = y clipped to [l, r], k = s/b, h = k^2/2, dm = (m - y)/b.
    ok is False where that form may lose precision (large k or |dm|, tiny density):
    then the caller takes the log-space score instead."""
    k = s / b
    dm = (m - y) / b
    if k > 20.0 or abs(dm) > 200.0:
        return False, 0.0, 0.0
    zl, zr = (l - m) / s, (r - m) / s
    zu = (min(max(y, l), r) - m) / s
    h = 0.5 * k * k
    el, er = math.exp(-abs(y - l) / b), math.exp(-abs(y - r) / b)
    p = _Phi(zl) * el + _Phi(-zr) * er
    g_m = -_phi(zl) / s * el + _phi(zr) / s * er
    g_s = -_phi(zl) * zl / s * el + _phi(zr) * zr / s * er
    if y > l:
        e = math.exp(dm + h)
        d = normal_cdf_diff(zl - k, zu - k)
        p += e * d
        g_m += e * (d / b - (_phi(zu - k) - _phi(zl - k)) / s)
        g_s += e * (d * k / b - _phi(zu - k) * (zu / s + 1.0 / b)
                    + _phi(zl - k) * (zl / s + 1.0 / b))
    if y < r:
        e = math.exp(h - dm)
        d = normal_cdf_diff(-zr - k, -zu - k)
        p += e * d
        g_m += e * (-d / b + (_phi(-zu - k) - _phi(-zr - k)) / s)
        g_s += e * (d * k / b + _phi(-zu - k) * (zu / s - 1.0 / b)
                    - _phi(-zr - k) * (zr / s - 1.0 / b))
    if not p > 1e-100:
        return False, 0.0, 0.0
    return True, g_m / p, g_s / p


class OnlineGradient:
    """The online gradient estimate (module docstring) as an online "posterior" for
    Algorithm 1: ``update(y, l, r)``, and ``thompson_draw(rng)``, which returns the
    current estimate (no draw), so that :class:`dpbook.privacy.policies.AdaptivePolicy`
    places the interval there.  ``theta0`` is the starting estimate (default: the
    prior's median, (0, 1.2) for the Section 6 prior); ``t0`` delays the step sizes."""

    def __init__(self, eps, a=None, b=None, family=None, mechanism="laplace", theta0=None,
                 t0=10.0):
        self.eps = check_eps(eps)
        self.family = as_family(family)
        if not self.family.location_scale:
            raise ValueError("the online gradient method needs a location-scale family, "
                             f"not {self.family.name}")
        self.mechanism = check_mechanism(mechanism)
        if a is None and b is None:
            a, b = d_optimal_symmetric(self.eps, self.family, self.mechanism)
        self.a, self.b = (float(v) for v in check_interval(a, b, name="(a, b)"))
        if not (math.isfinite(t0) and t0 > 0):
            raise ValueError(f"t0 (the step-size delay) must be > 0, got {t0!r}")
        self.t0 = float(t0)
        if theta0 is None:
            theta0 = (0.0, math.sqrt(1.0 / math.log(2.0)))  # prior medians (Section 6)
        m0, c0 = self.family.check_theta(*theta0)
        self.u = np.array([m0, math.log(c0)])
        self.u0 = self.u.copy()
        F0 = fisher_information(self.a, self.b, self.eps, family=self.family,
                                mechanism=self.mechanism).F
        self.F0_inv = np.linalg.inv(F0)  # base information, theta = (0, 1)
        self.params = tuple(self.family.params)
        self.t = 0
        self.history = History(self.params)  # sd, ess, acceptance: nan (no posterior)

    @property
    def theta(self):
        return float(self.u[0]), float(math.exp(self.u[1]))

    def score(self, y, l, r, theta):
        """grad_theta log p(y | theta) for one release (exact)."""
        if self.family.name == "normal" and self.mechanism == "laplace":
            ok, g_m, g_s = _score_normal_laplace(y, l, r, (r - l) / self.eps, *theta)
            if ok:  # the compiled closed form, 1000 times faster than the numpy one
                return np.array([g_m, g_s])
            return np.asarray(normal_laplace.score(y, l, r, self.eps, *theta), float)
        return np.asarray(quadrature.score(y, l, r, self.eps, theta, self.family,
                                           self.mechanism), float).reshape(2)

    def update(self, y, l, r):
        y, l, r = check_release(y, l, r, self.t, math.inf)
        m, c = self.theta
        s = self.score(y, l, r, (m, c))
        s_u = np.array([s[0], c * s[1]])  # d/d log c = c d/dc
        # I_u^{-1} = diag(1, 1/c) (c^2 F0^{-1}) diag(1, 1/c)  (Theorem 3)
        scale = np.array([c, 1.0])
        step = scale * (self.F0_inv @ (scale * s_u))
        self.t += 1
        # a trust region: at most one scale c in m and a factor e^0.5 in c per release
        # (the information about c at a narrow interval is small, so early steps in
        # log c can be huge)
        self.u = self.u + np.clip(step / (self.t + self.t0), [-c, -0.5], [c, 0.5])
        h = self.history
        for p, v in zip(self.params, self.theta):
            getattr(h, f"mean_{p}").append(v)
            getattr(h, f"sd_{p}").append(math.nan)
        h.ess.append(math.nan)
        h.acceptance.append(math.nan)

    @property
    def stalled(self) -> bool:
        """True if releases came but the estimate never left its start (to 1e-9 of the
        start's scale): every release said nothing at the current estimate, as when all
        are clipped at the same end of an interval far from it; the estimate is then
        the start, not an answer."""
        if self.t == 0:
            return False
        c0 = math.exp(self.u0[1])
        return abs(self.u[0] - self.u0[0]) <= 1e-9 * c0 and \
            abs(self.u[1] - self.u0[1]) <= 1e-9

    def thompson_draw(self, rng=None):
        """The current estimate (the method has no posterior to draw from)."""
        return self.theta

    def summary(self):
        """{param: {"mean": estimate, "sd": nan}} (a point estimate has no sd)."""
        return {p: {"mean": v, "sd": math.nan} for p, v in zip(self.params, self.theta)}
