"""Marginal SMC on theta for long streams: iterated batch importance sampling (IBIS,
Chopin 2002), the way out of the O(N n^2) cost of Algorithms 2-3 that Section 4 ("the
computational cost ... is O(Nn^2) in general") and Section 7 of the paper point to.

The particles carry theta only; the latent x_t are integrated out of each release's
likelihood, p^eps_{l_t, r_t}(y_t | theta) (the factor of eq. 5; closed form for the
normal family with the Laplace mechanism, :mod:`dpbook.likelihood.normal_laplace`; the
compiled quadrature of :mod:`dpbook.likelihood.compiled_quadrature` for another
location-scale family with the Laplace or Gaussian mechanism; the numpy quadrature of
:mod:`dpbook.likelihood.quadrature` otherwise).  Release t reweights every
particle by it.  When the effective sample size falls below ``ess_threshold`` N the
particles are resampled (systematic) and moved by ``moves`` random-walk
Metropolis-Hastings steps that target p(theta | y_{1:t}) (eq. 5) on the unconstrained
scale (log for a positive parameter), with proposal covariance 2.38^2 / d times the
particles' covariance (Roberts, Gelman and Gilks 1997), as the ``particles`` library's
IBIS does.  With ``kernel="independent"`` the proposal is instead the Gaussian fitted to
the particles (an independent Metropolis-Hastings kernel, as in Chopin 2002), which
accepts more often once the posterior is close to Gaussian.  A move costs N t likelihood
terms; moves become rarer as the posterior concentrates, so the whole run costs about
O(N n log n) instead of O(N n^2).

The random walk is screened by delayed acceptance (Christen and Fox 2005; ``delayed``,
on by default): a proposal first passes an MH test on the Gaussian fitted to the
particles, which costs nothing, and only then the exact test with the ratio corrected
by the surrogate's, min(1, pi(u') g(u) / (pi(u) g(u'))).  The product of the two is
still an MH kernel that keeps p(theta | y_{1:t}) invariant (each stage is reversible),
and the N t likelihood terms are computed only for the proposals that pass the first
stage: about 35% of them for a random walk at the 2.38^2 / d scale on the paper's model
(eps = 1, 5 and 10), for an acceptance rate a few points lower (timings in the
reproduction notes).
"""

from __future__ import annotations

import math
import time

import numpy as np

from dpbook.backends import backend
from dpbook.diagnostics import log_likelihood
from dpbook.model.families import as_family
from dpbook.model.mechanisms import check_mechanism
from dpbook.smc.resample_move import (
    History,
    ParticlePosterior,
    check_particles,
    check_reliability,
)
from dpbook.smc.resampling import ess, systematic
from dpbook.validation import (
    as_generator,
    check_count,
    check_eps,
    check_memory,
    check_observations,
    check_release,
)

_RW_SCALE2 = 2.38**2
BLOCK = 256  # releases at most whose likelihood terms are computed in one call


class MarginalSMC(ParticlePosterior):
    """Online posterior p(theta | y_{1:t}) by IBIS (module docstring), one release at a
    time: ``update(y, l, r)``; or ``update_many(y, l, r)``, the same numbers with the
    likelihood terms of a block of releases in one compiled call (``loglik_terms``).
    The same interface as :class:`dpbook.smc.SMC` for the interval policies
    (``thompson_draw``), summaries (``summary``, ``quantile``) and ``history``;
    ``timing`` splits the seconds spent into reweighting, resampling and moves,
    and ``history.moves`` lists the t at which the particles were moved."""

    def __init__(self, eps, family=None, mechanism="laplace", n_particles=1000,
                 ess_threshold=0.5, moves=5, seed=0, kernel="rw", delayed=True):
        self.eps = check_eps(eps)
        self.family = as_family(family)
        self.mechanism = check_mechanism(mechanism)
        self.n_particles = check_count("n_particles", n_particles, minimum=2)
        dim = as_family(family).dim
        # theta, its proposal and free coordinates, weights, likelihoods and temporaries
        check_memory(f"a marginal SMC with {self.n_particles} particles",
                     8.0 * self.n_particles * (8 + 4 * dim))
        self.moves = check_count("moves", moves)
        if not 0.0 < float(ess_threshold) <= 1.0:
            raise ValueError(f"ess_threshold must lie in (0, 1], got {ess_threshold!r}")
        self.ess_threshold = float(ess_threshold)
        if kernel not in ("rw", "independent"):
            raise ValueError(f"kernel must be 'rw' or 'independent', got {kernel!r}")
        self.kernel = kernel
        if not isinstance(delayed, (bool, np.bool_)):
            raise ValueError(f"delayed must be True or False, got {delayed!r}")
        self.delayed = bool(delayed)
        self.evaluations = 0  # proposals whose exact target was computed
        self.rng = as_generator(seed, "seed")
        self.params = tuple(self.family.params)
        self.positive = np.array(self.family.positive, dtype=bool)
        self.compiled = backend("loglik_particles", self.family, self.mechanism)
        self.terms = backend("loglik_terms", self.family, self.mechanism)
        self.theta = np.asarray(self.family.sample_prior(self.rng, self.n_particles), float)
        self.theta = self.theta.reshape(self.n_particles, len(self.params))
        self.logw = np.zeros(self.n_particles)
        self.loglik = np.zeros(self.n_particles)  # sum_{s <= t} log p(y_s | theta_i)
        self.y, self.l, self.r = [], [], []
        self.history = History(self.params)
        self.history.moves = []
        self.timing = {"reweight": 0.0, "resample": 0.0, "move": 0.0}

    @property
    def t(self) -> int:
        return len(self.y)

    @property
    def w(self) -> np.ndarray:
        w = np.exp(self.logw - self.logw.max())
        return w / w.sum()

    def log_likelihood(self, theta, y, l, r) -> np.ndarray:
        """sum_s log p^eps_{l_s, r_s}(y_s | theta_i) for each row theta_i of ``theta``,
        shape (len(theta),): the registered compiled kernel (normal/Laplace:
        :func:`dpbook.likelihood.normal_laplace.loglik_particles`) or the engine's
        (:func:`dpbook.likelihood.compiled_quadrature.engine_loglik`), else numpy quadrature
        with the
        releases in blocks (:func:`dpbook.diagnostics.log_likelihood`)."""
        return log_likelihood(theta, y, l, r, self.eps, self.family, self.mechanism,
                              compiled=self.compiled)

    def update(self, y, l, r):
        """Reweight by release (y, l, r); resample and move if the ESS is low."""
        y, l, r = check_release(y, l, r, self.t, math.inf)
        self._absorb(*(np.array([float(v)]) for v in (y, l, r)))

    def update_many(self, y, l, r):
        """:meth:`update` with each release (y_t, l_t, r_t) in turn, the same numbers bit
        for bit, with the likelihood terms of a block of releases computed in one call
        (a batch of devices, a fixed interval)."""
        y, l, r = check_observations(y, l, r)
        self._absorb(y, l, r)

    def _terms(self, y, l, r) -> np.ndarray:
        """log p(y_t | theta_i), shape (len(y), N): the compiled kernel's block, or
        :meth:`log_likelihood` release by release (the same numbers)."""
        if self.terms is not None:
            return self.terms(y, l, r, self.eps, self.theta)
        return np.stack([self.log_likelihood(self.theta, y[j:j + 1], l[j:j + 1], r[j:j + 1])
                         for j in range(len(y))])

    def _absorb(self, y, l, r):
        j = 0
        while j < len(y):
            # a block's terms are spent at a resample-move (the particles change); the
            # moves come at t growing by a factor, so a block of t/8 wastes little
            t0 = time.perf_counter()
            size = min(BLOCK, max(1, self.t // 8)) if self.terms is not None else 1
            stop = min(len(y), j + size)
            inc = self._terms(y[j:stop], l[j:stop], r[j:stop])
            self.timing["reweight"] += time.perf_counter() - t0
            for k in range(stop - j):
                self.y.append(float(y[j + k]))
                self.l.append(float(l[j + k]))
                self.r.append(float(r[j + k]))
                self.loglik += inc[k]
                self.logw += inc[k]
                w = self.w
                e = ess(w)
                if e < self.ess_threshold * self.n_particles:
                    acc = self._resample_move(w)
                    self._record(self.w, e, acc)
                    j += k + 1
                    break
                self._record(w, e, math.nan)
            else:
                j = stop

    def _to_u(self, theta):
        return np.where(self.positive, np.log(np.abs(theta)), theta)

    def _from_u(self, u):
        # a proposal far in the tail overflows to a scale of inf, whose target is 0:
        # the move rejects it (numpy's warning would reach the command line's stderr)
        with np.errstate(over="ignore"):
            return np.where(self.positive, np.exp(u), u)

    def _log_target(self, theta, u, loglik):
        """log of p(theta | y_{1:t}) up to a constant, as a density of u (Jacobian of
        the log transform of positive parameters included)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = self.family.log_prior(*theta.T)
        return lp + loglik + (u * self.positive).sum(axis=1)

    def _resample_move(self, w) -> float:
        t0 = time.perf_counter()
        idx = systematic(self.rng, w)
        self.theta, self.loglik = self.theta[idx], self.loglik[idx]
        self.logw[:] = 0.0
        t1 = time.perf_counter()
        self.timing["resample"] += t1 - t0
        u = self._to_u(self.theta)
        d = u.shape[1]
        cov = np.atleast_2d(np.cov(u, rowvar=False)) * _RW_SCALE2 / d
        chol = np.linalg.cholesky(cov + 1e-12 * np.eye(d) * max(np.trace(cov), 1e-300))
        centre = u.mean(axis=0)
        # the Gaussian fitted to the particles: Chopin's independent proposal, and the
        # surrogate that screens the random walk
        fit = chol * math.sqrt(d / _RW_SCALE2)
        inv = np.linalg.inv(fit)

        def gauss(v):  # log density of the fitted Gaussian, up to a constant
            return -0.5 * np.sum(((v - centre) @ inv.T) ** 2, axis=1)

        current = self._log_target(self.theta, u, self.loglik)
        current_q = gauss(u)
        data = [np.asarray(v) for v in (self.y, self.l, self.r)]
        screen = self.kernel == "rw" and self.delayed  # Christen and Fox (2005)
        accepted = evaluated = 0
        for _ in range(self.moves):
            z = self.rng.standard_normal(u.shape)
            if self.kernel == "independent":  # Chopin (2002): a Gaussian fit, not a walk
                u_new, new_q = centre + z @ fit.T, -0.5 * np.sum(z * z, axis=1)
            else:
                u_new = u + z @ chol.T
                new_q = gauss(u_new)
            if screen:  # the first stage, on the surrogate; the exact target only after
                log_u1, log_u2 = np.log(self.rng.random((2, len(u))))
                sel = np.flatnonzero(log_u1 < new_q - current_q)
            else:
                log_u2 = np.log(self.rng.random(len(u)))
                sel = np.arange(len(u))
            # q(u) / q(u_new): the independent proposal's Hastings ratio, or the
            # correction of the screened walk's second stage (0 for the plain walk)
            correction = (current_q - new_q if self.kernel == "independent" or screen
                          else np.zeros(len(u)))
            theta_new = self._from_u(u_new[sel])
            loglik_new = self.log_likelihood(theta_new, *data)
            proposed = self._log_target(theta_new, u_new[sel], loglik_new)
            log_ratio = proposed - current[sel] + correction[sel]
            ok = (log_u2[sel] < log_ratio) & np.isfinite(proposed)
            k = sel[ok]
            u[k], self.theta[k] = u_new[k], theta_new[ok]
            self.loglik[k], current[k], current_q[k] = loglik_new[ok], proposed[ok], new_q[k]
            accepted += len(k)
            evaluated += len(sel)
        self.timing["move"] += time.perf_counter() - t1
        self.history.moves.append(self.t)
        self.evaluations += evaluated
        return accepted / (self.moves * len(u))

    def _record(self, w, e, acc):
        h = self.history
        mean = w @ self.theta
        sd = np.sqrt(np.maximum(w @ (self.theta - mean) ** 2, 0.0))
        for j, p in enumerate(self.params):
            getattr(h, f"mean_{p}").append(float(mean[j]))
            getattr(h, f"sd_{p}").append(float(sd[j]))
        h.ess.append(float(e))
        h.acceptance.append(acc)  # of the theta moves (nan: no move at this step)
        h.theta_acceptance.append(acc)


def marginal_posterior(y, l, r, eps, family=None, mechanism="laplace", n_particles=1000,
                       ess_threshold=0.5, moves=5, seed=0, kernel="rw",
                       delayed=True, progress=None) -> MarginalSMC:
    """IBIS over given releases (y_t, l_t, r_t), t = 1..n: the :class:`MarginalSMC`
    after the last one (``progress``: an object whose ``update()`` is called per
    release, such as a tqdm bar)."""
    y, l, r = check_observations(y, l, r)
    smc = MarginalSMC(eps, family, mechanism, n_particles=n_particles,
                      ess_threshold=ess_threshold, moves=moves, seed=seed, kernel=kernel,
                      delayed=delayed)
    for t in range(len(y)):
        smc.update(y[t], l[t], r[t])
        if progress is not None:
            progress.update()
    check_reliability(smc, "the marginal SMC", stacklevel=3)
    check_particles(smc, y, l, r, "the marginal SMC", stacklevel=3)
    return smc
