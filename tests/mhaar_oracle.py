"""The numpy MHAAR sampler that dpbook shipped before its engine (issue 24): the test
oracle the engine (:mod:`dpbook.mhaar.compiled_chain`) is checked against.

Alparslan & Yildirim (2022), Algorithm 8, for any family and mechanism, vectorised in
numpy: random numbers from one numpy Generator (proposal normals, the (N-1) x n fresh
latent draws, the accept uniform, the n resampling uniforms), a random walk in the
unconstrained coordinates (log of positive parameters) with the Jacobian, log-sum-exp
over the N draws, initial steps from :func:`dpbook.mhaar.sampler.pilot_steps`, start
``family.guess``.  Discrete families with the default latent map draw their quantiles
from a cdf table with a guide table (:class:`_DiscreteQuantile`).  Independent of the
engine's code but for the pilot and the result type.
"""

from __future__ import annotations

import math
import time

import numpy as np

from dpbook.mhaar.sampler import (
    ADAPT_EXPONENT,
    ADAPT_START_FRACTION,
    TARGET_ACCEPT,
    MHAARResult,
    pilot_steps,
)
from dpbook.model.families import Family, LocationScaleFamily, as_family
from dpbook.model.mechanisms import GaussianMechanism, LaplaceMechanism, get_mechanism

MAX_TABLE = 100_000  # largest cdf table of the discrete quantile path
SMALL_SEARCH = 4096  # fewer draws: binary search instead of the guide table

# ---------------------------------------------------------------- latent map and weights


class _DiscreteQuantile:
    """x = min{k integer : F(k) >= u} by a cdf table with a guide table.

    The table of theta holds F(k), k = lo - 1 .. hi; it serves draws in [umin, umax] when
    F(lo - 1) < umin and F(hi) >= umax.  The range (lo, hi), common to all thetas, is
    reset (from family.ppf at the draws' extremes, merged with the old range unless that
    would more than double it) only when that check fails; the tables of the last two
    thetas are kept (the current theta's is reused from one iteration to the next).
    Ranges wider than MAX_TABLE use family.from_latent.
    Look-up of more than SMALL_SEARCH draws by indexed search (Chen & Asau 1974):
    guide[j] = min{i : F_i >= j/G}, so the answer for u in [j/G, (j+1)/G) is guide[j] plus
    a few steps, taken only by the draws that need them (a binary search over 20 000
    random keys was 5 times slower); fewer draws use the binary search (less overhead).
    """

    G = 1024  # guide bins

    def __init__(self, family):
        self.family = family
        self.lo = None
        self.hi = None
        self.cache = {}
        self.grid = np.arange(self.G) / self.G

    def _widen(self, theta, umin, umax):
        q = np.asarray(self.family.ppf(np.array([umin, umax]), *theta), float)
        if not np.all(np.isfinite(q)) or q[1] - q[0] > MAX_TABLE:
            return False
        lo, hi = int(q[0]), int(q[1])
        if self.lo is not None:
            # merge with the old range (it serves the other theta of the iteration) unless
            # the chain has moved away from it
            ulo, uhi = min(lo, self.lo), max(hi, self.hi)
            if uhi - ulo <= 2 * (hi - lo) + 16:
                lo, hi = ulo, uhi
        if (lo, hi) != (self.lo, self.hi):
            self.lo, self.hi = lo, hi
            self.cache.clear()
        return True

    def _table(self, theta):
        entry = self.cache.get(theta)
        if entry is None:
            ks = np.arange(self.lo - 1, self.hi + 1, dtype=float)
            tab = np.asarray(self.family.cdf(ks, *theta), float)
            if len(self.cache) >= 2:
                self.cache.pop(next(iter(self.cache)))
            entry = self.cache[theta] = [tab, None]
        return entry

    def _guide(self, entry):
        if entry[1] is None:
            tab = entry[0]
            entry[1] = np.minimum(np.searchsorted(tab, self.grid, side="left"), tab.size - 1)
        return entry[1]

    def __call__(self, u, bins, theta, out, umin, umax):
        """out = quantiles of the flat draws u (bins = floor(G u)) at theta."""
        if self.lo is None and not self._widen(theta, umin, umax):
            out[...] = self.family.from_latent(u, *theta)
            return
        entry = self._table(theta)
        tab = entry[0]
        ok = tab[0] < umin and tab[-1] >= umax
        if not ok:
            if not self._widen(theta, umin, umax):
                out[...] = self.family.from_latent(u, *theta)
                return
            entry = self._table(theta)
            tab = entry[0]
            ok = tab[0] < umin and tab[-1] >= umax
        if u.size <= SMALL_SEARCH:
            idx = np.searchsorted(tab, u, side="left")  # same answer, less overhead
        else:
            idx = self._guide(entry)[bins]
            top = tab.size - 1
            sub = np.flatnonzero(tab[idx] < u)
            while sub.size:
                idx[sub] += 1
                sub = sub[(tab[idx[sub]] < u[sub]) & (idx[sub] < top)]
        if not ok:  # u = 0, or cdf and ppf disagree at the ends: stay inside the table
            np.maximum(idx, 1, out=idx)
        np.add(idx, self.lo - 1, out=out)


def latent_mapper(fam):
    """f(u, (theta_1, .., theta_d), out) writing from_latent(u, *theta) to out."""
    cls = type(fam)
    if isinstance(fam, LocationScaleFamily) and cls.from_latent is LocationScaleFamily.from_latent:
        def loc_scale(u, theta, out):
            np.multiply(u, theta[1], out=out)
            np.add(out, theta[0], out=out)
        return loc_scale
    if (fam.discrete and cls.from_latent is Family.from_latent
            and cls.latent_sample is Family.latent_sample):
        table = _DiscreteQuantile(fam)

        def discrete(u, theta, out):
            uf = u.reshape(-1)
            umin, umax = float(uf.min()), float(uf.max())
            bins = (uf * table.G).astype(np.intp) if uf.size > SMALL_SEARCH else None
            for k in range(out.shape[0]):
                table(uf, bins, tuple(float(t[k, 0, 0]) for t in theta), out[k].reshape(-1),
                      umin, umax)
        return discrete

    def generic(u, theta, out):
        out[...] = fam.from_latent(u, *theta)
    return generic


def _log_weights(mech, y, l, r, b, ib, x):
    """x (.., N, n) latent values -> log h(y | x) in place, up to a term per observation
    that is common to all draws and both thetas (it cancels in the ratio and the
    resampling): the built-in mechanisms drop their normalising constants."""
    np.maximum(x, l, out=x)
    np.minimum(x, r, out=x)
    np.subtract(y, x, out=x)
    if type(mech) is LaplaceMechanism:
        np.abs(x, out=x)
        np.multiply(x, -ib, out=x)  # -|v|/b
    elif type(mech) is GaussianMechanism:
        np.multiply(x, ib, out=x)
        np.square(x, out=x)
        np.multiply(x, -0.5, out=x)  # -(v/b)^2/2
    else:
        x[...] = mech.logpdf(x, b)


def mhaar_numpy(y, l, r, eps, family=None, mechanism="laplace", n_iter=100_000, n_aux=20,
                seed=0, burn_fraction=0.8, steps=None, adapt=True):
    """MHAAR (Algorithm 8) in numpy, the old ``mhaar(..., generic=True)``; ``seed`` for
    ``numpy.random.default_rng``; ``steps`` in the walk's coordinates."""
    fam = as_family(family)
    mech = get_mechanism(mechanism)
    y, l, r = (np.broadcast_to(np.asarray(a, float), np.shape(y)).copy() for a in (y, l, r))
    n, d = y.size, fam.dim
    positive = np.array(fam.positive, dtype=bool)
    if steps is not None:
        steps = np.asarray(steps, dtype=float)
    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    b = (r - l) / eps
    ib = 1.0 / b
    theta = np.array(fam.check_theta(*fam.guess(y, l, r, eps, mechanism)), dtype=float)
    theta0 = theta.copy()
    if steps is None:
        steps = pilot_steps(fam, mech, y, l, r, b, theta, positive, rng)
    log_steps = np.log(steps)
    steps = np.exp(log_steps)

    pos_idx = [j for j in range(d) if positive[j]]

    def log_target(th, ph):
        """log eta(theta) + log Jacobian of phi -> theta (the sum of the log coordinates)."""
        lp = float(np.asarray(fam.log_prior(*th), float))
        return lp + sum(float(ph[j]) for j in pos_idx)

    xmap = latent_mapper(fam)
    adapt_start = int(math.floor(ADAPT_START_FRACTION * n_iter)) if adapt else n_iter + 1
    out_theta = np.empty((n_iter, d))
    out_acc = np.empty(n_iter, dtype=bool)
    out_steps = np.empty((n_iter, d))
    # workspaces: latent draws (N, n); values and weights for both thetas (2, N, n)
    u = np.empty((n_aux, n))
    u[0] = fam.latent_sample(rng, n)
    x = np.empty((2, n_aux, n))
    mx = np.empty((2, n))
    ssum = np.empty((2, n))
    cum = np.empty((n_aux, n))
    le = np.empty((n_aux - 1, n), dtype=bool)
    idx = np.empty(n, dtype=np.intp)
    cols = np.arange(n)
    th2 = np.empty((2, d))  # rows: theta, theta'
    args = tuple(th2[:, j, None, None] for j in range(d))  # (2, 1, 1) views
    amax, asum = np.maximum.reduce, np.add.reduce
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        phi = np.where(positive, np.log(theta), theta)
        lt = log_target(theta, phi)
        for m in range(1, n_iter + 1):
            phi1 = phi + steps * rng.standard_normal(d)
            theta1 = np.where(positive, np.exp(phi1), phi1)
            valid = bool(np.isfinite(theta1).all())
            lt1 = log_target(theta1, phi1) if valid else -math.inf
            valid = math.isfinite(lt1)
            th2[0] = theta
            th2[1] = theta1 if valid else theta  # invalid: theta's weights twice (rejected)
            u[1:] = fam.latent_sample(rng, (n_aux - 1, n))
            w = rng.random()
            xmap(u, args, x)
            _log_weights(mech, y, l, r, b, ib, x)
            # log-sum-exp over the N draws of every observation, both thetas at once
            amax(x, axis=1, out=mx)
            np.subtract(x, mx[:, None, :], out=x)
            np.exp(x, out=x)
            asum(x, axis=1, out=ssum)
            np.log(ssum, out=ssum)
            np.add(ssum, mx, out=ssum)
            tot = asum(ssum, axis=1)
            acc = valid and math.log(w) < lt1 - lt + float(tot[1] - tot[0])
            k = 1 if acc else 0
            if acc:
                theta, phi, lt = theta1, phi1, lt1
            # step 4: k_t by the inverse cdf of the chosen theta's weights
            np.add.accumulate(x[k], axis=0, out=cum)
            gt = rng.random(n)
            np.multiply(gt, cum[-1], out=gt)
            np.less_equal(cum[:-1], gt, out=le)
            asum(le, axis=0, dtype=np.intp, out=idx)
            u[0] = u[idx, cols]
            out_theta[m - 1] = theta
            out_acc[m - 1] = acc
            if m > adapt_start:
                log_steps = log_steps + m ** (-ADAPT_EXPONENT) * (float(acc) - TARGET_ACCEPT)
                steps = np.exp(log_steps)
            out_steps[m - 1] = steps
    coords = tuple(f"log_{p}" if pos else p for p, pos in zip(fam.params, positive))
    return MHAARResult(params=tuple(fam.params), samples=out_theta, accepted=out_acc,
                       steps=out_steps, theta0=theta0, burn_fraction=burn_fraction,
                       n_aux=n_aux, eps=eps, seed=seed, family=fam.describe(),
                       mechanism=mech.name, seconds=time.perf_counter() - t_start,
                       step_coords=coords)


