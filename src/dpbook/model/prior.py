"""The prior eta(theta) of Section 6, shared by every algorithm, and its generalisation.

For the normal model theta = (mu, sigma): mu ~ N(0, 10^4) and sigma^2 ~ IG(1, 1) (shape 1,
scale 1), independent.  :class:`dpbook.model.families.LocationScaleFamily` gives every
location-scale family theta = (m, c) the same prior (m for mu, c for sigma) through its
``prior`` attribute, a :class:`LocationScalePrior`; ``family.with_prior(...)`` gives a copy
of the family with other hyperparameters (chapter 8 uses a narrower prior).  The compiled
kernels take the prior as an argument (the exact posterior's and MHAAR's) or read it
from the family (the SMC); under a prior other than Section 6's the paper model's
compiled MHAAR moves (mu, log sigma^2) instead of the paper's (mu, sigma^2).
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass

import numpy as np
from numba import njit
from scipy import special, stats

LOC_MEAN = 0.0  # mu ~ N(LOC_MEAN, LOC_VAR)
LOC_VAR = 1.0e4
SCALE2_SHAPE = 1.0  # sigma^2 ~ IG(SCALE2_SHAPE, SCALE2_SCALE)
SCALE2_SCALE = 1.0


@dataclass(frozen=True)
class LocationScalePrior:
    """m ~ N(loc_mean, loc_var) and c^2 ~ IG(scale2_shape, scale2_scale), independent
    (Section 6 with its hyperparameters as arguments; the defaults are the paper's)."""

    loc_mean: float = LOC_MEAN
    loc_var: float = LOC_VAR
    scale2_shape: float = SCALE2_SHAPE
    scale2_scale: float = SCALE2_SCALE

    def __post_init__(self):
        for name, value in zip(("loc_mean", "loc_var", "scale2_shape", "scale2_scale"),
                               astuple(self)):
            try:
                f = float(value)
            except (TypeError, ValueError):
                f = math.nan
            if not math.isfinite(f) or (name != "loc_mean" and f <= 0):
                kind = "a finite" if name == "loc_mean" else "a positive finite"
                raise ValueError(f"prior {name} must be {kind} number, got {value!r}")
            object.__setattr__(self, name, f)

    @property
    def is_section6(self) -> bool:
        return self == SECTION6

    def log_density(self, m, c):
        """log eta(m, c), a density in (m, c): the density of c follows from that of c^2
        by the change of variables p(c) = 2 c IG(c^2; shape, scale)."""
        c = np.asarray(c, float)
        a, b = self.scale2_shape, self.scale2_scale
        with np.errstate(divide="ignore", invalid="ignore"):
            lp_m = (-0.5 * (m - self.loc_mean) ** 2 / self.loc_var
                    - 0.5 * np.log(2 * np.pi * self.loc_var))
            v = c * c
            lp_v = a * np.log(b) - special.gammaln(a) - (a + 1) * np.log(v) - b / v
            out = lp_m + lp_v + np.log(2 * c)
        return np.where(c > 0, out, -np.inf)

    def sample(self, rng: np.random.Generator, size):
        """(size, 2) draws of (m, c)."""
        m = self.loc_mean + math.sqrt(self.loc_var) * rng.standard_normal(size)
        c = np.sqrt(self.scale2_scale / rng.gamma(self.scale2_shape, 1.0, size))
        return np.column_stack([m, c])

    def iqr(self):
        """Interquartile ranges of m and of c: 2 z_0.75 sqrt(loc_var) for the normal m,
        and sqrt(scale / G) between G's quartiles, G ~ Gamma(shape), for c."""
        a, b = self.scale2_shape, self.scale2_scale
        g25, g75 = stats.gamma.ppf([0.25, 0.75], a)
        return (2 * stats.norm.ppf(0.75) * self.loc_var ** 0.5,
                float((b / g25) ** 0.5 - (b / g75) ** 0.5))

    def describe(self, params=("m", "c")) -> str:
        m, c = params
        return (f"{m} ~ N({self.loc_mean:g}, {self.loc_var:g}), "
                f"{c}^2 ~ IG({self.scale2_shape:g}, {self.scale2_scale:g})")


SECTION6 = LocationScalePrior()


@njit(cache=True)
def log_prior_free(m, c, pr):
    """log eta(m, c) + log c (the Jacobian of c = exp(phi)), up to a constant:
    m ~ N(pr[0], pr[1]); c^2 ~ IG(pr[2], pr[3]) gives c^(-2 a - 1) exp(-b / c^2)."""
    return -0.5 * (m - pr[0]) ** 2 / pr[1] - 2.0 * pr[2] * math.log(c) - pr[3] / (c * c)
