"""The prior eta(theta) of Section 6, shared by every algorithm, and its generalisation.

For the normal model theta = (mu, sigma): mu ~ N(0, 10^4) and sigma^2 ~ IG(1, 1) (shape 1,
scale 1), independent.  :class:`dpbook.model.families.LocationScaleFamily` gives every
location-scale family theta = (m, c) the same prior (m for mu, c for sigma) through its
``prior`` attribute, a :class:`LocationScalePrior`; ``family.with_prior(...)`` gives a copy
of the family with other hyperparameters (chapter 8 uses a narrower prior).  The compiled
kernels take the prior as an argument (the exact posterior's and MHAAR's) or read it
from the family (the SMC); under a prior other than Section 6's the paper model's
compiled MHAAR moves (mu, log sigma^2) instead of the paper's (mu, sigma^2).  The
Poisson's conjugate prior is a :class:`GammaPrior`.

Section 6's prior is in the units of its simulated data (values near 0 with spread 1);
:func:`prior_from_range` gives one in the data's own units from a plausible range of
the values, public information the user states (chapter 10).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np
from numba import njit
from scipy import special, stats

LOC_MEAN = 0.0  # mu ~ N(LOC_MEAN, LOC_VAR)
LOC_VAR = 1.0e4
SCALE2_SHAPE = 1.0  # sigma^2 ~ IG(SCALE2_SHAPE, SCALE2_SCALE)
SCALE2_SCALE = 1.0


def _check_hyperparameters(prior, signed=()):
    """Make every field of a frozen prior dataclass a float; ValueError naming the first
    that is not a finite number, or not > 0 (all but those in ``signed``)."""
    for f in fields(prior):
        value = getattr(prior, f.name)
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = math.nan
        if not math.isfinite(v) or (f.name not in signed and v <= 0):
            kind = "a finite" if f.name in signed else "a positive finite"
            raise ValueError(f"prior {f.name} must be {kind} number, got {value!r}")
        object.__setattr__(prior, f.name, v)


@dataclass(frozen=True)
class LocationScalePrior:
    """m ~ N(loc_mean, loc_var) and c^2 ~ IG(scale2_shape, scale2_scale), independent
    (Section 6 with its hyperparameters as arguments; the defaults are the paper's)."""

    loc_mean: float = LOC_MEAN
    loc_var: float = LOC_VAR
    scale2_shape: float = SCALE2_SHAPE
    scale2_scale: float = SCALE2_SCALE

    def __post_init__(self):
        _check_hyperparameters(self, signed=("loc_mean",))

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

    def quantiles(self, q):
        """Marginal prior quantiles of (m, c), shape (len(q), 2): m normal, and
        c = sqrt(c^2) with c^2 inverse gamma."""
        q = np.atleast_1d(np.asarray(q, float))
        m = stats.norm.ppf(q, self.loc_mean, self.loc_var ** 0.5)
        c = np.sqrt(stats.invgamma.ppf(q, self.scale2_shape, scale=self.scale2_scale))
        return np.column_stack([m, c])

    def describe(self, params=("m", "c")) -> str:
        m, c = params
        return (f"{m} ~ N({self.loc_mean:g}, {self.loc_var:g}), "
                f"{c}^2 ~ IG({self.scale2_shape:g}, {self.scale2_scale:g})")

    def to_dict(self) -> dict:
        """A JSON-ready description: the kind and the hyperparameters."""
        return {"kind": "location-scale: loc ~ normal(loc_mean, loc_var), "
                        "scale^2 ~ inverse-gamma(scale2_shape, scale2_scale)",
                **asdict(self)}


SECTION6 = LocationScalePrior()


@dataclass(frozen=True)
class GammaPrior:
    """A positive parameter ~ Gamma(shape, rate), density rate^shape x^(shape-1)
    e^(-rate x) / Gamma(shape): the Poisson's conjugate prior (defaults: shape 1, rate
    0.01, mean 100 and sd 100)."""

    shape: float = 1.0
    rate: float = 0.01

    def __post_init__(self):
        _check_hyperparameters(self)

    def quantiles(self, q):
        """Prior quantiles, shape (len(q), 1)."""
        q = np.atleast_1d(np.asarray(q, float))
        return stats.gamma.ppf(q, self.shape, scale=1.0 / self.rate)[:, None]

    def describe(self, params=("lam",)) -> str:
        return f"{params[0]} ~ Gamma(shape {self.shape:g}, rate {self.rate:g})"

    def to_dict(self) -> dict:
        """A JSON-ready description: the kind and the hyperparameters."""
        return {"kind": "gamma(shape, rate)", **asdict(self)}


def check_range(lo, hi):
    """(lo, hi) as floats; ValueError unless both are finite numbers with lo < hi."""
    try:
        a, b = float(lo), float(hi)
    except (TypeError, ValueError):
        raise ValueError(f"the range needs two numbers LO < HI, got ({lo!r}, {hi!r})") from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"the range must be finite, got ({lo!r}, {hi!r})")
    if not a < b:
        raise ValueError(f"the range is empty: LO must be below HI, got ({lo!r}, {hi!r})")
    return a, b


RANGE_MAX = 1e150  # the half-width of a --range whose square (a variance) stays finite


def prior_from_range(family, lo, hi):
    """A copy of ``family`` with a prior in the units of a plausible range [lo, hi] of the
    values (public information, never computed from the sensitive values), h = (hi - lo)/2:

    * a location-scale family: loc ~ N((lo + hi)/2, h^2) and scale^2 ~
      IG(1, ((hi - lo)/20)^2), shape 1 as in Section 6: the prior median of the scale is
      (hi - lo)/(20 sqrt(log 2)) ~ (hi - lo)/17, its 90% interval about
      [(hi - lo)/35, (hi - lo)/4.5];
    * a family with a :class:`GammaPrior` (the Poisson): a Gamma with mean (lo + hi)/2
      and sd h (lo must be >= 0: counts).

    ValueError (one line) for a range that is not finite or is empty, or a family whose
    prior is neither (it needs an explicit prior)."""
    a, b = check_range(lo, hi)
    mid, h = 0.5 * (a + b), 0.5 * (b - a)
    if not h <= RANGE_MAX:  # its square is the prior's variance: it must be a double
        raise ValueError(f"the range ({lo!r}, {hi!r}) is too wide for the prior's "
                         f"variance (its half-width squared) in double precision: the "
                         f"half-width can be at most {RANGE_MAX:g}")
    prior = getattr(family, "prior", None)
    if getattr(family, "location_scale", False) and isinstance(prior, LocationScalePrior):
        return family.with_prior(LocationScalePrior(
            loc_mean=mid, loc_var=h * h, scale2_shape=1.0, scale2_scale=((b - a) / 20.0) ** 2))
    if isinstance(prior, GammaPrior):
        if a < 0:
            raise ValueError(f"the {family.name} family's values are not negative: the range "
                             f"needs LO >= 0, got ({lo!r}, {hi!r})")
        return family.with_prior(GammaPrior(shape=(mid / h) ** 2, rate=mid / (h * h)))
    raise ValueError(f"no prior from a range for the {getattr(family, 'name', family)!r} "
                     f"family (neither location-scale nor gamma): it needs an explicit prior")


@njit(cache=True)
def log_prior_free(m, c, pr):
    """log eta(m, c) + log c (the Jacobian of c = exp(phi)), up to a constant:
    m ~ N(pr[0], pr[1]); c^2 ~ IG(pr[2], pr[3]) gives c^(-2 a - 1) exp(-b / c^2)."""
    return -0.5 * (m - pr[0]) ** 2 / pr[1] - 2.0 * pr[2] * math.log(c) - pr[3] / (c * c)
