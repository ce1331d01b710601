"""The Poisson family: counts, one parameter, not location-scale.

There is no base distribution here, so the best interval of eq. (9) depends on
lambda in a way no shift or scale captures: it is computed afresh for each sampled
theta (Section 5.2), in practice on a grid of lambda and interpolated.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpbook.model.families.base import Family
from dpbook.model.prior import GammaPrior

# prior lambda ~ Gamma(shape A0, rate B0): vague (mean 100, sd 100) and conjugate
A0 = 1.0
B0 = 0.01


class Poisson(Family):
    """P(X = x) = lam^x exp(-lam) / x!, x = 0, 1, ...; prior lam ~ Gamma(1, rate 0.01)
    (another through ``with_prior``, a :class:`~dpbook.model.prior.GammaPrior`)."""

    name = "poisson"
    params = ("lam",)
    positive = (True,)
    discrete = True
    summary = "Poisson(lam) counts: not location-scale (interval re-optimised per theta)"
    prior = GammaPrior(A0, B0)

    def logpdf(self, x, lam):
        x = np.asarray(x, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = special.xlogy(x, lam) - lam - special.gammaln(x + 1)
        ok = (x >= 0) & (x == np.floor(x))
        return np.where(ok, out, -np.inf)

    def score(self, x, lam):
        return (np.asarray(x, float) / lam - 1.0,)

    def sample(self, rng, lam, size=None):
        return rng.poisson(lam, size).astype(float)

    def cdf(self, x, lam):
        k = np.floor(np.asarray(x, float))
        return np.where(k < 0, 0.0, special.pdtr(np.maximum(k, 0), lam))

    def sf(self, x, lam):
        k = np.floor(np.asarray(x, float))
        return np.where(k < 0, 1.0, special.pdtrc(np.maximum(k, 0), lam))

    def ppf(self, q, lam):
        """The smallest k with P(X <= k) >= q (``scipy.stats.poisson.ppf``'s definition).
        For one lam and 0 < q < 1, by a table of the cdf (``special.pdtr``) over the k
        that matter: scipy finds each quantile by a root search of pdtrik, about 1 us a
        value, which was most of the time of the Poisson's MHAAR (its draws by the
        inverse cdf)."""
        from scipy import stats

        q = np.asarray(q, float)
        lam_f = float(lam) if np.ndim(lam) == 0 else math.nan
        if 0.0 < lam_f < 1e8 and q.size and np.all((q > 0.0) & (q < 1.0)):
            spread = 40.0 * math.sqrt(lam_f) + 40.0
            k0 = max(0, math.floor(lam_f - spread))
            ks = np.arange(k0, math.ceil(lam_f + spread) + 1, dtype=float)
            cdf = special.pdtr(ks, lam_f)
            k = np.searchsorted(cdf, q, side="left")
            # below the table (q under P(X < k0), ~1e-300) or above it: scipy's search
            if np.all(k < ks.size) and (k0 == 0 or np.all(k > 0)) and \
                    np.all(np.diff(cdf) >= 0):
                return ks[k]
        return stats.poisson.ppf(q, lam)

    def cdf_grad(self, x, lam):
        """d/dlam P(X <= k) = -P(X = k)."""
        k = np.floor(np.asarray(x, float))
        return (np.where(k < 0, 0.0, -np.exp(self.logpdf(np.maximum(k, 0), lam))),)

    def log_prior(self, lam):
        lam = np.asarray(lam, float)
        a, b = self.prior.shape, self.prior.rate
        with np.errstate(divide="ignore", invalid="ignore"):
            out = a * math.log(b) - special.gammaln(a) + (a - 1) * np.log(lam) - b * lam
        return np.where(lam > 0, out, -np.inf)

    def sample_prior(self, rng, size):
        return rng.gamma(self.prior.shape, 1.0 / self.prior.rate, size)[:, None]

    def gibbs(self, rng, theta, x):
        """lam | x_{1:t} ~ Gamma(shape + sum x, rate + t) (conjugate)."""
        t = x.shape[1]
        return (rng.gamma(self.prior.shape + x.sum(axis=1), 1.0)
                / (self.prior.rate + t))[:, None]

    def guess(self, y, l, r, eps, mechanism):
        return (max(float(np.mean(y)), 0.1),)

    def fixed_interval(self, lam):
        """[lam - 10 sqrt(lam), lam + 10 sqrt(lam)]: the analogue of Section 6's."""
        return float(lam - 10 * math.sqrt(lam)), float(lam + 10 * math.sqrt(lam))

    def interval_lims(self, lam):
        lo = max(float(self.ppf(1e-3, lam)) - 1.0, -1.0)
        return lo, float(self.ppf(1 - 1e-3, lam)) + 1.0

    def default_theta(self):
        return (10.0,)
