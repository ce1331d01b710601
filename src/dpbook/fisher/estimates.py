"""Result types of the Fisher-information code and the checks they share.

:class:`FisherEstimate` is one Fisher information matrix F_{l,r}^eps(theta) (eq. 7, or
its Monte Carlo estimate eq. 8 with standard errors); :class:`FisherGrid` holds F on a
lattice of intervals, the search space of eq. (9) and (13).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

METHODS = ("exact", "mc")
SCORES = ("mu", "trace")



@dataclass(frozen=True)
class FisherEstimate:
    """A Fisher information matrix (eq. 7) for theta = (mu, sigma).

    F : (..., 2, 2) array.  For the Monte Carlo estimate of eq. (8) (``None`` for method
    'exact'): se, se_trace : total Monte Carlo standard errors of F and of its trace
    (outer M y-draws plus, with shared samples, the K shared Algorithm 4 samples, by
    the delta method); se_outer, se_outer_trace : the standard error of the mean of the
    M outer products s_j s_j^T alone (equal to se with fresh samples).
    """

    F: np.ndarray
    se: np.ndarray | None = None
    se_trace: float | None = None
    se_outer: np.ndarray | None = None
    se_outer_trace: float | None = None

    @property
    def trace(self):
        return np.trace(self.F, axis1=-2, axis2=-1)


# --------------------------------------------------------------------------- checks


def check_method(method):
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return method


def check_score(score):
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {', '.join(SCORES)}")
    return score


def check_lims(lims):
    try:
        lo, hi = (float(v) for v in lims)
    except (TypeError, ValueError):
        raise ValueError(f"lims must be two finite numbers (lo, hi), got {lims!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise ValueError(f"lims must be two finite numbers with lo < hi, got {lims!r}")
    return lo, hi


@dataclass(frozen=True)
class FisherGrid:
    """F_{l,r}^eps(theta) on a grid of intervals for the search of eq. (9), or of eq. (13)
    (theta = (0, 1), the base distribution of a location-scale family).

    F[i, j] is the (d, d) Fisher information (eq. 7 exact, or eq. 8 with Algorithm 4)
    for l = a_values[i], r = b_values[j]; NaN where l >= r.  se / se_trace: Monte Carlo
    standard errors (method 'mc'), else None.  ``family``, ``mechanism``, ``theta``:
    the model the grid was computed for.
    """

    eps: float
    method: str
    a_values: np.ndarray
    b_values: np.ndarray
    F: np.ndarray
    se: np.ndarray | None = None
    se_trace: np.ndarray | None = None
    se_outer: np.ndarray | None = None
    se_outer_trace: np.ndarray | None = None
    family: object = None
    mechanism: str = "laplace"
    theta: tuple = ()

    def scores(self, score="mu"):
        """The score surface sc(F) of eq. (9)/(13): F[0, 0] ('mu') or the trace."""
        check_score(score)
        if score == "mu":
            return self.F[..., 0, 0]
        if self.F.shape[-1] == 2:
            return self.F[..., 0, 0] + self.F[..., 1, 1]
        return np.trace(self.F, axis1=-2, axis2=-1)

    def score_se(self, score="mu"):
        """Monte Carlo standard error of scores(score) (total, see se); None for 'exact'."""
        check_score(score)
        if self.se is None:
            return None
        return self.se[..., 0, 0] if score == "mu" else self.se_trace

    def frame(self, score="mu"):
        """The grid as a long-form DataFrame, one row per interval a < b: columns eps,
        method, a, b, score (sc(F) of :meth:`scores`) and, for Monte Carlo, se."""
        import pandas as pd

        a, b = np.meshgrid(self.a_values, self.b_values, indexing="ij")
        columns = {"a": a.ravel(), "b": b.ravel(), "score": self.scores(score).ravel()}
        se = self.score_se(score)
        if se is not None:
            columns["se"] = se.ravel()
        df = pd.DataFrame(columns).dropna(subset=["score"])
        return df.assign(eps=self.eps, method=self.method).reset_index(drop=True)

    def best(self, score="mu"):
        """(a*, b*, score value, se) maximising sc(F_{a,b}^eps(0, 1)), eq. (13).

        Ties go to the first cell in row-major (a, then b) order; se is None for 'exact'.
        """
        S = self.scores(score)
        i, j = np.unravel_index(np.nanargmax(S), S.shape)
        se = self.score_se(score)
        return (float(self.a_values[i]), float(self.b_values[j]), float(S[i, j]),
                None if se is None else float(se[i, j]))
