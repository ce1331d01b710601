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
form for normal/Laplace, the compiled quadrature of :mod:`dpbook.likelihood.compiled_quadrature` for
another location-scale family, numpy quadrature otherwise; chosen by
:mod:`dpbook.backends`), and by Theorem 3 the information of the
interval at theta is the base one scaled, F_theta = F_{a,b}(0, 1) / c^2, so the step
costs one score evaluation.  Steps 1/t with the inverse information give an
asymptotically efficient estimate (Sakrison 1965), about what the posterior mean
achieves, at O(1) cost per individual.  There is no posterior: no credible intervals,
and no Thompson sampling, so the interval always sits at the current estimate (no
exploration; chapter 9 measures what that costs).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from dpbook.backends import backend
from dpbook.fisher import fisher_information
from dpbook.likelihood import quadrature
from dpbook.model.families import as_family
from dpbook.model.mechanisms import check_mechanism
from dpbook.numba_cache import cached
from dpbook.smc.resample_move import History
from dpbook.validation import check_eps, check_interval, check_observations, check_release
from dpbook.vmath import fma


def d_optimal_symmetric(eps, family=None, mechanism="laplace"):
    """The symmetric base interval [-A, A] that maximises det F_{-A,A}(0, 1) (A on a
    grid of 200 values from 0.05 to 5): informative about both m and c, which a point
    estimate without exploration needs (the F_mumu-optimal interval of eq. 13 is nearly
    blind to c at small eps)."""
    A = np.geomspace(0.05, 5.0, 200)
    F = fisher_information(-A, A, eps, family=family, mechanism=mechanism).F
    best = float(A[np.argmax(np.linalg.det(F))])
    return -best, best


@njit(cache=True)
def _step(u, t, t0, F0_inv, c, g_m, g_c):
    """Robbins-Monro step t of Section 7 (module docstring; I_u from Theorem 3), in
    place on u = (m, log c), from the score (g_m, g_c) at (u[0], c = e^u[1]).  The
    product F0_inv v is written as numpy's ``F0_inv @ v`` computed it here (OpenBLAS's
    gemv with fused multiply-add: fma(F00, v0, F01 v1), checked on 200000 random cases),
    so the estimates keep the bits they were recorded with, now on every CPU."""
    v0 = c * g_m  # diag(c, 1) grad_u log p, grad_u = (d/dm, c d/dc)
    v1 = c * g_c
    step0 = c * fma(F0_inv[0, 0], v0, F0_inv[0, 1] * v1) / (t + t0)
    step1 = fma(F0_inv[1, 0], v0, F0_inv[1, 1] * v1) / (t + t0)
    # a trust region: at most one scale c in m and a factor e^0.5 in c per release
    # (the information about c at a narrow interval is small, so early steps in log c
    # can be huge); a nan passes, as through np.clip
    step0 = -c if step0 < -c else (c if step0 > c else step0)
    step1 = -0.5 if step1 < -0.5 else (0.5 if step1 > 0.5 else step1)
    u[0] += step0
    u[1] += step1


@functools.cache
def _steps(kernel):
    """Steps for releases in turn, compiled for a score ``kernel``
    (:class:`dpbook.likelihood.compiled.CompiledScore`): ``steps(u, t, t0, F0_inv, eps,
    y, l, r, ctx, path)`` moves u in place, path[j] = u after release j, and returns
    how many releases it took (fewer than len(y) where the kernel could not answer)."""

    @njit
    def steps(u, t, t0, F0_inv, eps, y, l, r, ctx, path):
        for j in range(y.shape[0]):
            c = math.exp(u[1])
            ok, g_m, g_c = kernel(y[j], l[j], r[j], (r[j] - l[j]) / eps, u[0], c, ctx)
            if not ok:
                return j
            _step(u, t + j + 1, t0, F0_inv, c, g_m, g_c)
            path[j, 0] = u[0]
            path[j, 1] = u[1]
        return y.shape[0]

    return cached(steps)


class OnlineGradient:
    """The online gradient estimate (module docstring) as an online "posterior" for
    Algorithm 1: ``update(y, l, r)`` (or ``update_many`` for a block of releases: the
    same numbers, one compiled loop), and ``thompson_draw(rng)``, which returns the
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
        self._compiled = backend("score", self.family, self.mechanism)

    @property
    def theta(self):
        return float(self.u[0]), float(math.exp(self.u[1]))

    def score(self, y, l, r, theta):
        """grad_theta log p(y | theta) for one release (exact): the backend's compiled
        score (:func:`dpbook.backends.backend`, ``"score"``: the paper model's closed
        form, the engine's quadrature for another location-scale family), else the
        numpy quadrature."""
        if self._compiled is not None:
            return self._compiled(y, l, r, self.eps, *theta)
        return np.asarray(quadrature.score(y, l, r, self.eps, theta, self.family,
                                           self.mechanism), float).reshape(2)

    def update(self, y, l, r):
        """One step with release (y, l, r) (module docstring)."""
        y, l, r = check_release(y, l, r, self.t, math.inf)
        self._absorb(np.array([y]), np.array([l]), np.array([r]))

    def update_many(self, y, l, r):
        """:meth:`update` with each release (y_t, l_t, r_t) in turn, the same numbers bit
        for bit (each step's score at the estimate the step before left), in one
        compiled loop where the score compiles (a batch of devices, one interval)."""
        self._absorb(*check_observations(y, l, r))

    def _absorb(self, y, l, r):
        n = len(y)
        u = self.u.copy()
        path = np.empty((n, 2))
        j = 0
        while j < n:
            if self._compiled is not None:
                j += _steps(self._compiled.kernel)(u, self.t + j, self.t0, self.F0_inv,
                                                   self.eps, y[j:], l[j:], r[j:],
                                                   self._compiled.ctx, path[j:])
            if j < n:  # no compiled score, or it could not answer here: numpy's
                c = math.exp(u[1])
                s = self.score(float(y[j]), float(l[j]), float(r[j]), (float(u[0]), c))
                _step(u, self.t + j + 1, self.t0, self.F0_inv, c, float(s[0]), float(s[1]))
                path[j] = u
                j += 1
        self.t += n
        self.u = u
        h = self.history
        for m, log_c in path:
            for p, v in zip(self.params, (float(m), math.exp(log_c))):
                getattr(h, f"mean_{p}").append(v)
                getattr(h, f"sd_{p}").append(math.nan)
        h.ess.extend([math.nan] * n)
        h.acceptance.extend([math.nan] * n)

    def __getstate__(self):  # the compiled score is found again on loading
        return {k: v for k, v in self.__dict__.items() if k != "_compiled"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._compiled = backend("score", self.family, self.mechanism)

    def thompson_draw(self, rng=None):
        """The current estimate (the method has no posterior to draw from)."""
        return self.theta

    def summary(self):
        """{param: {"mean": estimate, "sd": nan}} (a point estimate has no sd)."""
        return {p: {"mean": v, "sd": math.nan} for p, v in zip(self.params, self.theta)}
