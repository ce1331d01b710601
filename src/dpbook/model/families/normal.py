"""The normal family N(mu, sigma^2) of Section 6, with its conjugate Gibbs move."""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from scipy import special

from dpbook import rng as _rng
from dpbook.model.families.base import LocationScaleFamily

_SQRT2 = math.sqrt(2.0)


@njit(cache=True)
def gibbs_conjugate(s, t, m, sg, s1, s2, pr):
    """Algorithm 3 step 4 for the normal family as a Gibbs move given t > 0 latent values
    with s1 = sum x_k, s2 = sum x_k^2, drawing from the keyed stream state s: mu | sigma,
    x ~ N(v (m0/var0 + s1/sigma^2), v), v = 1/(1/var0 + t/sigma^2), then sigma^2 | mu,
    x ~ IG(a + t/2, b + sum (x_k - mu)^2 / 2).  pr: the prior's (loc_mean = m0,
    loc_var = var0, scale2_shape = a, scale2_scale = b).  Returns (s, mu, sigma)."""
    v = 1.0 / (1.0 / pr[1] + t / (sg * sg))
    s, z = _rng.normal(s)
    m = v * (pr[0] / pr[1] + s1 / (sg * sg)) + math.sqrt(v) * z
    ss = max(s2 - 2.0 * m * s1 + t * m * m, 0.0)
    s, g = _rng.gamma(s, pr[2] + 0.5 * t)
    sg = math.sqrt((pr[3] + 0.5 * ss) / g)
    return s, m, sg


@njit(cache=True)
def gibbs_path(fs, s, row, t, m, sg, pr):
    """:func:`gibbs_conjugate` given the latent values row[0], ..., row[t-1] (t > 0): the
    normal family's compiled conjugate move (``Normal.engine_gibbs``; ``fs``, the
    family's numeric attributes, is not read).
    Returns (s, mu, sigma)."""
    a1 = a2 = b1 = b2 = 0.0  # two partial sums each: half the dependency chain
    t2 = t - t % 2
    for k in range(0, t2, 2):
        x0 = row[k]
        x1 = row[k + 1]
        a1 += x0
        a2 += x0 * x0
        b1 += x1
        b2 += x1 * x1
    if t2 < t:
        x0 = row[t2]
        a1 += x0
        a2 += x0 * x0
    return gibbs_conjugate(s, t, m, sg, a1 + b1, a2 + b2, pr)


class Normal(LocationScaleFamily):
    """X ~ N(mu, sigma^2); prior mu ~ N(0, 10^4), sigma^2 ~ IG(1, 1) (Section 6; another
    through ``with_prior``)."""

    name = "normal"
    params = ("mu", "sigma")
    summary = "N(mu, sigma^2), the paper's model (Section 6); conjugate Gibbs move"
    # the conjugate move of gibbs, compiled: a function (state, keyed stream, row, t, mu,
    # sigma, prior) -> (stream, mu, sigma), named "module:attribute"
    engine_gibbs = "dpbook.model.families.normal:gibbs_path"
    # x_k's proposals in the latent SMC's sweep by the ziggurat, not the quantile (faster)
    engine_draw = "dpbook.rng:ZIGGURAT"

    def base_logpdf(self, z):
        return -0.5 * z * z - 0.5 * math.log(2 * math.pi)

    def base_dlogpdf(self, z):
        return -z

    def base_cdf(self, z):
        return special.ndtr(z)

    def base_sf(self, z):
        return special.ndtr(-z)

    def base_ppf(self, q):
        return special.ndtri(q)

    def base_sample(self, rng, size=None):
        return rng.standard_normal(size)

    def gibbs(self, rng, theta, x):
        """Algorithm 3 step 4 as two conjugate draws (as :func:`gibbs_conjugate` compiled):
        mu | sigma, x ~ N(v (m0/s0^2 + sum x / sigma^2), v), v = 1/(1/s0^2 + t/sigma^2);
        then sigma^2 | mu, x ~ IG(a + t/2, b + sum (x - mu)^2 / 2)."""
        t = x.shape[1]
        p = self.prior
        sg = theta[:, 1]
        s1 = x.sum(axis=1)
        v = 1.0 / (1.0 / p.loc_var + t / sg**2)
        mu = v * (p.loc_mean / p.loc_var + s1 / sg**2) + np.sqrt(v) * rng.standard_normal(len(sg))
        ss = ((x - mu[:, None]) ** 2).sum(axis=1)
        g = rng.gamma(p.scale2_shape + 0.5 * t, 1.0, len(sg))
        return np.column_stack([mu, np.sqrt((p.scale2_scale + 0.5 * ss) / g)])

    def default_theta(self):
        return 50.0, math.sqrt(10.0)  # Section 6
