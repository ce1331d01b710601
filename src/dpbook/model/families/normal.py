"""The normal family N(mu, sigma^2) of Section 6, with its conjugate Gibbs move."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpbook.model.families.base import LocationScaleFamily

_SQRT2 = math.sqrt(2.0)


class Normal(LocationScaleFamily):
    """X ~ N(mu, sigma^2); prior mu ~ N(0, 10^4), sigma^2 ~ IG(1, 1) (Section 6; another
    through ``with_prior``)."""

    name = "normal"
    params = ("mu", "sigma")
    summary = "N(mu, sigma^2), the paper's model (Section 6); conjugate Gibbs move"
    # the conjugate move of gibbs, compiled for the latent SMC engine (dpbook.smc.engine:
    # a function (state, keyed stream, row, t, mu, sigma, prior) -> (stream, mu, sigma))
    engine_gibbs = "dpbook.smc.normal_laplace:gibbs_path"
    # x_k's proposals in the engine's sweep by the ziggurat, not the quantile (faster)
    engine_draw = "dpbook.smc.engine:ZIGGURAT"

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
        """Algorithm 3 step 4 as two conjugate draws (as the compiled kernel in smc.py):
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
