"""Choosing the truncation interval for any family and mechanism: eq. (9), (11)-(13).

Paper, Section 5.  The next interval maximises a score of the Fisher information of
one release (eq. 7) at a Thompson draw theta_t from the posterior (Step 1 of Section
5.1):

    (l_{t+1}, r_{t+1}) = argmax_{l<r} sc(F_{l,r}^eps(theta_t))                 (eq. 9)

* Location-scale families (Definition 2): by Theorem 3 the search is done once, for
  the base distribution, (a*, b*) = argmax sc(F_{a,b}^eps(0, 1)) (eq. 13), and
  l = m + a* c, r = m + b* c (eq. 11): :func:`best_interval` and
  :class:`dpbook.privacy.policies.AdaptivePolicy`.
* Other families (the Poisson): (9) "needs to be performed afresh for each theta_t"
  (Section 5.2).  :class:`ThetaGridIntervals` does it once on a grid of theta and
  interpolates; :class:`ThetaGridPolicy` is Steps 1-2 of Section 5.1 with it.

The search itself is a grid x grid lattice of (l, r) with l < r (the paper: 50 x 50),
with F exact (numerical integration of eq. 7:
``dpbook.likelihood.fisher_quadrature.fisher_exact``, or the family's closed form where
it has one) or Monte Carlo (eq. 8 with Algorithm 4: the engine of
:mod:`dpbook.fisher.mc`, one for every family and mechanism).

sc is F[0, 0] ('mu': the first parameter, the paper's choice in Section 6; for the
Poisson it is F itself) or the trace ('trace').

Random numbers (method 'mc'): ``np.random.default_rng(seed)`` draws one set of base
draws used by every cell (common random numbers), in fisher_mc's order, so cell (l, r)
is bit-identical to ``fisher_mc(l, r, eps, theta, family, mechanism, M=M, K=K,
rng=np.random.default_rng(seed))``.  Cells run in
a thread pool, one cell per thread call with a fixed summation order: the result does
not depend on the number of threads.
"""

from __future__ import annotations

import itertools
import math
import os
import time

import numpy as np

from dpbook.fisher.estimates import (
    FisherGrid,
    check_lims,
    check_method,
    check_score,
)
from dpbook.fisher.exact_information import fisher_exact
from dpbook.fisher.mc import fisher_mc_bytes, fisher_mc_pairs, mc_setup
from dpbook.validation import check_count, check_eps, check_mc_size, check_memory, check_positive

BASE_LIMS = (-3.0, 3.0)  # the paper's (a, b) range for the base distribution (Section 6)


def _default_lims(fam, theta, lims):
    if lims is not None:
        return check_lims(lims)
    if fam.location_scale:
        m, c = theta
        return m + c * BASE_LIMS[0], m + c * BASE_LIMS[1]
    return check_lims(fam.interval_lims(*theta))


def _exact_pairs(A, B, eps, fam, mech, theta):
    """Exact F (eq. 7) for all pairs at once (:func:`dpbook.fisher.fisher_exact`)."""
    F = np.asarray(fisher_exact(A, B, eps, theta, fam, mech), dtype=float)
    d = fam.dim
    if F.shape != (A.size, d, d):
        raise RuntimeError(f"fisher_exact returned shape {F.shape}, expected {(A.size, d, d)}")
    return F


def fisher_grid(eps, family=None, mechanism="laplace", theta=None, method="exact", grid=50,
                lims=None, M=1000, K=10000, seed=0, workers=None, path="auto"):
    """F_{l,r}^eps(theta) on a grid x grid lattice of (l, r), for the search of eq. (9)/(13).

    l and r both run over np.linspace(lo, hi, grid); only pairs l < r are computed (NaN
    elsewhere).  theta: None -> (0, 1) for a location-scale family (the base
    distribution of eq. 13; lims default (-3, 3), the paper's) and
    family.default_theta() otherwise (lims default family.interval_lims(*theta)); a
    location-scale theta = (m, c) gives lims m + c (-3, 3) by default.

    method='exact': eq. (7) by :func:`dpbook.fisher.fisher_exact`.  method='mc':
    eq. (8) with Algorithm 4 scores (:func:`dpbook.fisher.fisher_mc`; path as there),
    on common random numbers from ``seed`` (see the module docstring), cells in
    ``workers`` threads (default all cores).  Returns a :class:`FisherGrid` with
    a_values = l values and b_values = r values.

    """
    grid = check_count("grid", grid, 2)
    mem = grid * grid * (2 * 8 * 2 * 2 + 16)  # F and its standard errors, per cell
    if method == "mc":
        mem += fisher_mc_bytes(check_mc_size("M", M), check_mc_size("K", K))
    check_memory(f"a {grid} x {grid} grid of Fisher informations", mem)
    eps = check_eps(eps)
    check_method(method)
    fam, mech, theta = mc_setup(family, mechanism, theta)
    grid = check_count("grid", grid, 2)
    lo, hi = _default_lims(fam, theta, lims)
    vals = np.linspace(lo, hi, grid)
    ia, ib = np.nonzero(vals[:, None] < vals[None, :])
    A, B = vals[ia], vals[ib]
    d = fam.dim
    F = np.full((grid, grid, d, d), np.nan)
    meta = dict(family=fam, mechanism=mech.name, theta=theta)
    if method == "exact":
        F[ia, ib] = _exact_pairs(A, B, eps, fam, mech, theta)
        return FisherGrid(eps, method, vals, vals.copy(), F, **meta)
    M = check_mc_size("M", M)
    K = check_mc_size("K", K)
    if workers is None:
        workers = os.cpu_count() or 1
    workers = check_count("workers", workers, 1)
    Fc, sec, sec_tr, soc, soc_tr = fisher_mc_pairs(A, B, eps, fam, mech, theta, M, K, seed, workers,
                                             path)
    F[ia, ib] = Fc

    def spread(x):
        out = np.full((grid, grid) + x.shape[1:], np.nan)
        out[ia, ib] = x
        return out

    return FisherGrid(eps, method, vals, vals.copy(), F, se=spread(sec),
                            se_trace=spread(sec_tr), se_outer=spread(soc),
                            se_outer_trace=spread(soc_tr), **meta)


def best_interval(eps, family=None, mechanism="laplace", theta=None, method="exact", grid=50,
                  lims=None, score="mu", M=1000, K=10000, seed=0, workers=None):
    """The grid maximiser of sc(F_{l,r}^eps(theta)), eq. (9); eq. (13) for the base
    distribution of a location-scale family (theta None).

    Returns {"l", "r", "score", "se"} (se None for 'exact'; ties go to the first cell in
    row-major order) and, for a location-scale family, also the standardised
    {"a", "b"} = ((l - m)/c, (r - m)/c) of eq. (11) (equal to l, r at the base).
    """
    check_score(score)
    g = fisher_grid(eps, family, mechanism, theta, method, grid, lims, M, K, seed, workers)
    l, r, s, se = g.best(score)
    out = {"l": l, "r": r, "score": s, "se": se}
    if g.family.location_scale:
        m, c = g.theta
        out["a"], out["b"] = (l - m) / c, (r - m) / c
    return out


# --------------------------------------------------------------------------- theta grid


def _theta_axes(fam, theta_grid, centre, span, points):
    """One strictly increasing axis per parameter (geometric for positive ones)."""
    d = fam.dim
    if theta_grid is not None:
        axes = [theta_grid] if d == 1 and np.ndim(theta_grid) == 1 else list(theta_grid)
        if len(axes) != d:
            raise ValueError(f"theta_grid needs one axis per parameter ({d}), got {len(axes)}")
        out = []
        for name, pos, ax in zip(fam.params, fam.positive, axes):
            a = np.asarray(ax, dtype=float)
            if a.ndim != 1 or a.size < 2 or not np.all(np.isfinite(a)) or np.any(np.diff(a) <= 0):
                raise ValueError(f"theta_grid axis for {name} must be >= 2 finite, strictly "
                                 "increasing values")
            if pos and a[0] <= 0:
                raise ValueError(f"theta_grid axis for {name} must be positive")
            out.append(a)
        return out
    centre = fam.check_theta(*np.atleast_1d(fam.default_theta() if centre is None
                                            else centre))
    span = check_positive("span", span)
    if span <= 1:
        raise ValueError(f"span must be > 1, got {span!r}")
    pts = (points,) * d if np.ndim(points) == 0 else tuple(points)
    if len(pts) != d:
        raise ValueError(f"points needs one count per parameter ({d}), got {len(pts)}")
    pts = [check_count("points", p, 2) for p in pts]
    out = []
    for name, pos, c, p in zip(fam.params, fam.positive, centre, pts):
        if not pos:
            raise ValueError(f"parameter {name} is not positive: give its axis in theta_grid")
        out.append(np.geomspace(c / span, c * span, p))
    return out


class ThetaGridIntervals:
    """eq. (9) on a grid of theta, interpolated: the best (l, r) for any theta.

    For a family that is not location-scale the maximiser of (9) depends on theta
    ("performed afresh for each theta", Section 5.2).  Built once: at every theta of
    the grid (default: ``points`` values per parameter, geometric over [c/span, c span]
    around ``centre``, default family.default_theta(); or ``theta_grid``: one axis per
    parameter), the best (l, r) of a grid x grid search over family.interval_lims(theta)
    (``fisher_grid``, exact by default).  :meth:`interval` interpolates l and r
    linearly (in log theta for positive parameters; RegularGridInterpolator for d > 1)
    and clamps theta to the grid's range.

    Attributes: axes (the theta axes), l, r, score (arrays over the theta grid),
    seconds (build time), evaluations (Fisher matrices computed).  :meth:`table` and
    :meth:`from_table` store and restore it (plain lists, JSON).
    """

    def __init__(self, family, eps, mechanism="laplace", *, theta_grid=None, centre=None,
                 span=4.0, points=25, method="exact", score="mu", grid=50, M=1000,
                 K=10000, seed=0, workers=None, center=None):
        from dpbook.model.families import as_family

        if center is not None:  # the American spelling, accepted as an alias
            if centre is not None:
                raise ValueError("give centre or center, not both")
            centre = center
        t0 = time.perf_counter()
        self.family = fam = as_family(family)
        self.eps = check_eps(eps)
        self.mechanism = mechanism
        self.score_name = check_score(score)
        check_method(method)
        grid = check_count("grid", grid, 2)
        self.axes = _theta_axes(fam, theta_grid, centre, span, points)
        self._log = [bool(p) for p in fam.positive]
        shape = tuple(a.size for a in self.axes)
        self.l = np.empty(shape)
        self.r = np.empty(shape)
        self.score = np.empty(shape)
        for idx in itertools.product(*(range(n) for n in shape)):
            theta = tuple(float(a[i]) for a, i in zip(self.axes, idx))
            g = fisher_grid(self.eps, fam, mechanism, theta, method, grid,
                                   fam.interval_lims(*theta), M, K, seed, workers)
            self.l[idx], self.r[idx], self.score[idx], _ = g.best(score)
        self.evaluations = int(np.prod(shape)) * grid * (grid - 1) // 2
        self._prepare()
        self.seconds = time.perf_counter() - t0

    def _prepare(self):
        self._coords = [np.log(a) if lg else a for a, lg in zip(self.axes, self._log)]
        self._interp = None
        if self.family.dim > 1:
            from scipy.interpolate import RegularGridInterpolator

            self._interp = [RegularGridInterpolator(self._coords, v) for v in (self.l, self.r)]

    def table(self) -> dict:
        """The grid of best intervals as plain lists (JSON), for :meth:`from_table`."""
        return {"family": self.family.name, "params": list(self.family.params),
                "eps": self.eps, "mechanism": getattr(self.mechanism, "name", self.mechanism),
                "score": self.score_name, "axes": [a.tolist() for a in self.axes],
                "l": self.l.tolist(), "r": self.r.tolist(), "value": self.score.tolist(),
                "seconds": self.seconds, "evaluations": self.evaluations}

    @classmethod
    def from_table(cls, family, table: dict):
        """Rebuild from :meth:`table`'s output without recomputing (no Fisher evaluations)."""
        from dpbook.model.families import as_family

        self = cls.__new__(cls)
        self.family = fam = as_family(family)
        if list(table["params"]) != list(fam.params):
            raise ValueError(f"table is for parameters {table['params']}, the {fam.name} "
                             f"family has {list(fam.params)}")
        self.eps = check_eps(table["eps"])
        self.mechanism = table["mechanism"]
        self.score_name = check_score(table["score"])
        self.axes = [np.asarray(a, dtype=float) for a in table["axes"]]
        self._log = [bool(p) for p in fam.positive]
        self.l, self.r, self.score = (np.asarray(table[k], dtype=float)
                                      for k in ("l", "r", "value"))
        shape = tuple(a.size for a in self.axes)
        if any(v.shape != shape for v in (self.l, self.r, self.score)):
            raise ValueError("table arrays do not match its theta axes")
        self.seconds = float(table.get("seconds", 0.0))
        self.evaluations = int(table.get("evaluations", 0))
        self._prepare()
        return self

    def interval(self, *theta):
        """(l, r) for theta: eq. (9) interpolated from the grid (clamped at its ends)."""
        theta = self.family.check_theta(*theta)
        q = [min(max(math.log(t) if lg else t, c[0]), c[-1])
             for t, lg, c in zip(theta, self._log, self._coords)]
        if self._interp is None:
            return (float(np.interp(q[0], self._coords[0], self.l)),
                    float(np.interp(q[0], self._coords[0], self.r)))
        return tuple(float(f([q])[0]) for f in self._interp)
