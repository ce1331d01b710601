"""Student's t location-scale family (Definition 2) with fixed degrees of freedom: heavy
tails, one of the other families Section 7 invites."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpbook import rng as keyed
from dpbook.model.families.base import LocationScaleFamily
from dpbook.model.tdist import stdtr, stdtrit
from dpbook.validation import check_positive

DF_RANGE = (0.1, 1e8)  # exact Fisher information checked against Monte Carlo at both ends


class StudentT(LocationScaleFamily):
    """p(x; loc, scale) = t_df((x - loc)/scale)/scale, df fixed (not estimated)."""

    name = "student_t"
    options = {"df": (float, 5.0, "degrees of freedom of the Student-t family")}
    summary = "Student-t(loc, scale) with fixed df (--df, default 5): heavy tails"
    def __init__(self, df=5.0):
        self.df = check_positive("df", df)
        if not DF_RANGE[0] <= self.df <= DF_RANGE[1]:
            raise ValueError(f"df must be in [{DF_RANGE[0]:g}, {DF_RANGE[1]:g}] (the range "
                             f"where dpbook's results are checked), got {df!r}")
        nu = self.df
        self._c = (special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2)
                   - 0.5 * math.log(nu * math.pi))

    def base_logpdf(self, z):
        nu = self.df
        return self._c - 0.5 * (nu + 1) * np.log1p(z * z / nu)

    def base_dlogpdf(self, z):
        nu = self.df
        return -(nu + 1) * z / (nu + z * z)

    # the cdf and quantiles of dpbook.model.tdist (numba ufuncs: these compile for the
    # engines as they are, and are the numpy code too)
    def base_cdf(self, z):
        return stdtr(self.df, z)

    def base_sf(self, z):
        return stdtr(self.df, -np.asarray(z, float))

    def base_ppf(self, q):
        return stdtrit(self.df, q)

    def base_sample(self, rng, size=None):
        return rng.standard_t(self.df, size)

    def base_draw(self, state):
        """t_df from the compiled engine's keyed generator state (returns the new state
        and the draw): z / sqrt(g / df), z ~ N(0, 1), g = 2 Gamma(df/2) ~ chi^2_df, the
        t's definition (Student, 1908), a few ns where the quantile, a Newton iteration
        on the incomplete beta, takes about 1.2 us."""
        state, z = keyed.normal(state)
        state, g = keyed.gamma_any(state, 0.5 * self.df)
        return state, z / np.sqrt(2.0 * g / self.df)

    def base_draw_pair(self, u, v):
        """t_df from two uniforms by Bailey's polar method (Bailey, 1994, Math. Comp. 62):
        a = 2u - 1, b = 2v - 1, w = a^2 + b^2; if w < 1, a sqrt(df (w^(-2/df) - 1) / w)
        is t_df; else nan, a rejection (probability 1 - pi/4).  Branch-free, so the
        engine draws a sweep's proposals in one vectorised loop (and the rejected ones
        by base_draw)."""
        a = 2.0 * u - 1.0
        b = 2.0 * v - 1.0
        w = a * a + b * b
        z = a * np.sqrt(self.df * np.expm1(-2.0 / self.df * np.log(w)) / w)
        return np.where(w < 1.0, z, np.nan)

    def describe(self):
        return f"student_t(loc, scale; df={self.df:g})"

    def default_theta(self):
        return 50.0, math.sqrt(10.0)
