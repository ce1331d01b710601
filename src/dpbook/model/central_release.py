"""The central release of the normal model: clipped sufficient statistics with Laplace
noise (Bernstein and Sheldon 2018, Sections 3.1 and 3.3), as the curator publishes them.

A trusted curator holds x_1, ..., x_n (n public), clips each value to a public interval
[l, r], centres it at c = (l + r)/2 and releases the two sums

    s_1 = sum_i z_i,   s_2 = sum_i z_i^2,   z_i = T_l^r(x_i) - c in [-h, h],  h = (r - l)/2,

each with its own Laplace noise: y_1 = s_1 + Lap(b_1), y_2 = s_2 + Lap(b_2) (B&S,
Definition 3).  Clipping is the main paper's T_l^r (eq. 10); B&S drop out-of-range
records instead, which with n public would leak the count of dropped records.

**The sensitivity, exactly.**  Neighbouring data sets differ by the substitution of one
person (n fixed: bounded DP, B&S footnote 2).  One substitution moves s_1 by at most
max |z - z'| = r - l and s_2 by at most max |z^2 - z'^2| = h^2 = (r - l)^2 / 4.  The
privacy budget of the sums, eps_sums, is split between them: s_1 gets
eps_1 = share * eps_sums and s_2 gets eps_2 = (1 - share) * eps_sums, so that

    b_1 = (r - l) / eps_1,   b_2 = (r - l)^2 / (4 eps_2),

and the pair is eps_sums-DP by sequential composition.  (The alternative, one vector
Laplace on (s_1, s_2) with the L1 sensitivity of the pair, B&S's bound
(r - l) + (r - l)^2/4, or the tight (1 + r - l)^2/4 for r - l >= 1, puts the same noise
scale on a sum of x and a sum of x^2, and so depends on the unit of x: at [-8, 8] and
eps = 1 it gives s_1 noise of scale 72.25 (tight) or 80 (B&S) where the even split
gives 32.)  In OpenDP's terms a substitution is a symmetric distance of 2 (one removal
plus one addition) on a data set of known size; ``tests/test_central.py`` checks b_1 and
b_2 against OpenDP's Laplace scale for the same sized, bounded sums at d_in = 2.

With a privately chosen interval the total eps is split once more: ``interval_share`` of
it goes to the two private quantiles that place [l, r] (:mod:`dpbook.privacy.central_curator`),
the rest to the sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpbook.validation import check_count, check_eps, check_finite_number, check_interval


def check_share(name: str, value) -> float:
    """A share of a privacy budget, strictly between 0 and 1 (one-line ValueError)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    return v


def sum_sensitivities(l, r) -> tuple[float, float]:
    """L1 sensitivities of s_1 and s_2 under substitution of one person (n public):
    (r - l, (r - l)^2 / 4) (module docstring)."""
    l, r = (float(v) for v in check_interval(l, r))
    return r - l, (r - l) ** 2 / 4.0


def noise_scales(l, r, eps_sums, share=0.5) -> tuple[float, float]:
    """Laplace scales (b_1, b_2) = ((r - l)/eps_1, (r - l)^2/(4 eps_2)) with
    eps_1 = share * eps_sums and eps_2 = (1 - share) * eps_sums."""
    eps_sums = check_eps(eps_sums)
    share = check_share("sum_share", share)
    d1, d2 = sum_sensitivities(l, r)
    return d1 / (share * eps_sums), d2 / ((1.0 - share) * eps_sums)


@dataclass(frozen=True)
class CentralRelease:
    """What the curator publishes: the noisy centred sums y_1, y_2 of n clipped values,
    the interval [l, r] they were clipped to, and the noise scales b_1, b_2 (public: the
    mechanism is).  ``eps`` is the whole budget spent on these people, ``eps_interval``
    the part spent choosing [l, r] (0 for a public interval)."""

    y1: float
    y2: float
    n: int
    l: float
    r: float
    b1: float
    b2: float
    eps: float
    eps_interval: float = 0.0

    def __post_init__(self):
        for name in ("y1", "y2"):
            object.__setattr__(self, name, check_finite_number(name, getattr(self, name)))
        object.__setattr__(self, "n", check_count("n", self.n))
        l, r = check_interval(self.l, self.r)
        object.__setattr__(self, "l", float(l))
        object.__setattr__(self, "r", float(r))
        for name in ("b1", "b2", "eps"):
            v = float(getattr(self, name))
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")

    @property
    def centre(self) -> float:
        return 0.5 * (self.l + self.r)

    @property
    def half_width(self) -> float:
        return 0.5 * (self.r - self.l)
