"""Exact (quadrature) density, score and Fisher information for any family and
mechanism.

One release is Y = T_l^r(X) + b V with X ~ P_theta, T_l^r the clip to [l, r], V
standard noise (Laplace or Gaussian) and b = (r - l)/eps (eq. 2, 10).  Its density,
the p of eq. (7) and the factor left in the posterior (5) once x is integrated out, is

    p(y | theta) = P(X <= l) g(y - l) + P(X >= r) g(y - r) + int_l^r p_theta(x) g(y - x) dx

(g the noise density of scale b); for a discrete family the integral is the sum over
the integers strictly inside (l, r), and an integer l (X = l clips to l) belongs to the
lower mass.  This module computes, with no Monte Carlo,

* :func:`log_density` -- log p(y | theta);
* :func:`score` -- grad_theta log p(y | theta) by Fisher's identity (Appendix C, the
  identity that Algorithm 4 approximates by importance sampling):
  [grad P(X <= l) g(y - l) + grad P(X >= r) g(y - r)
   + int p_theta(x) grad log p_theta(x) g(y - x) dx] / p(y);
* :func:`fisher_exact` -- F_{l,r}^eps(theta) of eq. (7), E[s(Y) s(Y)^T], by quadrature
  over y: the deterministic replacement of the Monte Carlo estimate (8);
* :func:`core` -- log p for arrays of releases and theta, which the exact posterior (5)
  runs for a family whose likelihood grid does not compile
  (:func:`dpbook.posterior.exact.numpy_model`).

For the normal family with the Laplace mechanism, :mod:`dpbook.likelihood.normal_laplace` has closed
forms; this module is the generic reference that agrees with them (tests/test_quadrature.py).

Quadrature (pointwise).  The x-integral is composite Gauss-Legendre (``NODES`` = 10 a
panel) over [l, r] cut to the family's effective support ``family.support(theta)``
(mass 1e-14 outside each end) widened to the noise's reach around y.  Panels end at
l, r, u = T_l^r(y) (the noise factor peaks there, with a kink for Laplace noise), u +-
the noise's ``mechanism.tail(b, tol)`` half-widths for tol = e^-2 ... 1e-17 (Laplace:
2, 6, 15, 39 b; Gaussian: 2, 3.5, 5.5, 8.7 b: across a panel the noise factor falls by
a bounded amount) and the family's quantiles at 19 levels from 1e-12 to 1 - 1e-12.
When y lies more than 6 b (Laplace; 3.5 b Gaussian) beyond those quantiles, the
integrand can peak in between, where nothing else resolves it: a golden-section search
finds the peak, its curvature a width w, and panels end at the peak +- (0.5 ... 12) w
(such elements are computed apart, so the others keep their smaller rule).  Sums are
in log space (log-sum-exp): tiny masses neither underflow nor lose the atoms.

Measured against the closed form (normal family, Laplace mechanism; eps in {0.5, 1,
10, 50}): 400 cases with widths 0.05-10, y within 3 b of [l, r], mu within 2 of it and
sigma 0.2-5: error in log p <= 7e-13, in the score <= 3e-10 (relative to 1 + |s|); 1200
cases with widths 0.01-100, y within 20 b, mu within 20 of [l, r], sigma 0.05-20:
relative error in log p <= 1.4e-12, score <= 2e-9.  Against scipy.integrate.quad for
the Laplace and Student-t (df 3, 5) families with either mechanism: <= 6e-12.

Fisher information. The y-integral is Gauss-Legendre (``FISHER_NODES`` = 8 a panel) on
panels that end at l, r, l and r +- the noise half-widths, the family's quantiles and a
uniform grid of spacing <= 2b over [l, r] cut to the support (at most 20000 points for
the running sums below, 400 for the matrix rule: a b smaller than 1/40000, resp. 1/800,
of the interval's width within the support raises ValueError rather than lose accuracy).
For the Laplace mechanism (continuous families) the tails are exact
(p(y) = p(l) e^{(y - l)/b} and s(y) = s(l) for y <= l, likewise above r) and the
x-integrals at all y nodes come from one pass: exp(-|y - x|/b) splits into
exp(+-(x - y)/b), so they are running sums over panels cut at every y node (4
Gauss-Legendre nodes between consecutive cuts).
Otherwise the x-integral is a matrix product with a fixed x rule (the same breakpoints;
the y nodes as extra cuts when the noise has a kink) and the tails are integrated out to
``mechanism.tail(b, 1e-16)``; discrete families sum over the integers and break the y
panels at them (kinks of p(y) under Laplace noise), or around each of them when b is
small. Measured on the 50 x 50 grid of [-3, 3] (eps in {0.5, 1, 10, 50}): agreement with
the closed form (:mod:`dpbook.likelihood.normal_laplace`) <= 2e-8 relative, which is its own
48-node error at eps = 50 (a rule with 20 nodes a panel and spacing b/2 changes ours by
< 2e-11); for the Gaussian mechanism the same refinement changes F by <= 3e-8 (eps = 50)
and <= 4e-10 (eps <= 10), for the normal, Laplace and Student-t families.

Posterior.  :mod:`dpbook.likelihood.compiled_quadrature` compiles the pointwise rule in the base's
coordinate for location-scale families (its tests check it against :func:`log_density`).

Why this module is over 500 lines: seventy of them are this description; the rest is one
quadrature (nodes, atoms of the clipped mass, break points at the noise's kink and peak)
that the density, the score and the Fisher information all use.
"""

from __future__ import annotations

import math

import numpy as np

from dpbook.model.families import as_family
from dpbook.model.mechanisms import get_mechanism
from dpbook.validation import (
    check_eps,
    check_finite,
    check_interval,
)

__all__ = ["log_density", "score"]

NODES = 10  # Gauss-Legendre nodes per x panel (pointwise density and score)
FISHER_NODES = 8  # Gauss-Legendre nodes per y panel of the Fisher integral
CUT_NODES = 4  # x nodes between consecutive cuts of the Laplace running sums
_SUPPORT_TAIL = 1e-14  # family.support(theta, tail): x outside carries negligible mass
_Q_LEVELS = np.array([1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.15, 0.3, 0.5,
                      0.7, 0.85, 0.95, 0.99, 0.999, 1 - 1e-4, 1 - 1e-6, 1 - 1e-9, 1 - 1e-12])
# noise half-widths mechanism.tail(b, tol): Laplace b (2, 6, 15, 39), Gaussian b (2, 3.5,
# 5.5, 8.7): across a panel the noise factor falls by a bounded amount
NOISE_TOLS = (math.exp(-2.0), math.exp(-6.0), math.exp(-15.0), 1e-17)
UNIFORM_SPACING = 2.0  # largest Fisher panel, in noise scales b, inside the support
# largest uniform grid of the Fisher rules: the running sums (Laplace) cost O(grid), the
# matrix rule O(grid^2); eps beyond ~2 x the cap needs a finer grid than the cap allows
MAX_UNIFORM = 20_000
MAX_UNIFORM_MATRIX = 400
CHUNK = 300_000  # elements per chunk of the pointwise rule (cache-sized: ~2x faster)
FISHER_CHUNK = 1_000_000  # elements per chunk of the Fisher rules

_GL_CACHE: dict = {}


def gauss_legendre(n):
    """Gauss-Legendre nodes and weights on [-1, 1]."""
    if n not in _GL_CACHE:
        _GL_CACHE[n] = np.polynomial.legendre.leggauss(n)
    return _GL_CACHE[n]


# ------------------------------------------------------------------------- inputs


def setup(family, mechanism):
    return as_family(family), get_mechanism(mechanism)


def check_theta(fam, theta):
    """theta as a tuple of float arrays (scalars pass family.check_theta)."""
    if not isinstance(theta, (tuple, list)) and fam.dim == 1:
        theta = (theta,)
    try:
        theta = tuple(theta)
    except TypeError:
        raise ValueError(f"theta must be a tuple of {fam.dim} parameters "
                         f"({', '.join(fam.params)}), got {theta!r}") from None
    if all(np.ndim(t) == 0 for t in theta):
        return tuple(np.asarray(t) for t in fam.check_theta(*theta))
    if len(theta) != fam.dim:
        raise ValueError(f"the {fam.name} family has {fam.dim} parameters "
                         f"({', '.join(fam.params)}), got {len(theta)}")
    out = []
    for name, pos, t in zip(fam.params, fam.positive, theta):
        a = np.asarray(t, dtype=float)
        if not np.all(np.isfinite(a)) or (pos and np.any(a <= 0)):
            kind = "positive finite" if pos else "finite"
            raise ValueError(f"{name} must be {kind} numbers")
        out.append(a)
    return tuple(out)


def noise_offsets(mech, b):
    """Breakpoint offsets (..., k) around a noise centre, from the noise's tail widths."""
    return np.stack([mech.tail(b, tol) for tol in NOISE_TOLS], axis=-1)


def theta_info(fam, th, levels=_Q_LEVELS):
    """(support lo, support hi, quantiles (..., levels)) for theta arrays of any shape."""
    lo, hi = fam.support(*th, tail=_SUPPORT_TAIL)
    # a quantile function that fails (scipy's Poisson ppf for lam > ~1e15) leaves [l, r]
    lo = np.where(np.isnan(lo), -np.inf, lo)
    hi = np.where(np.isnan(hi), np.inf, hi)
    q = None
    if not fam.discrete:
        q = np.asarray(fam.ppf(levels, *[np.asarray(t)[..., None] for t in th]), float)
        q = np.where(np.isnan(q), np.where(levels < 0.5, lo[..., None], hi[..., None]), q)
    return lo, hi, q


def atom_masses(fam, l, r, th, want_grad):
    """log P(X <= l), log P(X >= r) and, if asked, their gradients over the masses."""
    r_up = np.ceil(r) - 1.0 if fam.discrete else r  # P(X >= r) = P(X > ceil(r) - 1)
    ml = np.asarray(fam.cdf(l, *th), float)
    mr = np.asarray(fam.sf(r_up, *th), float)
    with np.errstate(divide="ignore"):
        out = [np.log(ml), np.log(mr)]
    if want_grad:
        gl = fam.cdf_grad(l, *th)
        gr = fam.cdf_grad(r_up, *th)
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(np.stack([np.where(ml > 0, np.asarray(g) / ml, 0.0) for g in gl], -1))
            out.append(np.stack([np.where(mr > 0, -np.asarray(g) / mr, 0.0) for g in gr], -1))
    return out


# ------------------------------------------------------------ pointwise density core


def drop_repeats(pts):
    """Sorted breakpoints (..., k) without repeats (clipping makes many), padded with the
    last point: fewer, not zero-width, panels."""
    rep = np.zeros(pts.shape, bool)
    rep[..., 1:] = pts[..., 1:] <= pts[..., :-1]
    keep = int(np.max(np.sum(~rep, axis=-1), initial=2))
    if keep == pts.shape[-1]:
        return pts
    top = pts[..., -1:]
    out = np.sort(np.where(rep, np.inf, pts), axis=-1)[..., :max(keep, 2)]
    return np.where(np.isfinite(out), out, top)


def panel_nodes(pts, n, compact=True):
    """Sorted breakpoints (..., k) -> Gauss-Legendre nodes and log weights (..., (k-1) n)."""
    if compact:
        pts = drop_repeats(pts)
    x, w = gauss_legendre(n)
    lo, hi = pts[..., :-1, None], pts[..., 1:, None]
    half = 0.5 * (hi - lo)
    nodes = 0.5 * (hi + lo) + half * x
    with np.errstate(divide="ignore"):
        logw = np.log(half) + np.log(w)  # one log per panel, not per node
    shape = pts.shape[:-1] + (-1,)
    return nodes.reshape(shape), logw.reshape(shape)


def _far(y, b, info, mech):
    """Where y lies beyond the family's quantile range by more than 6 b (Laplace) or
    3.5 b (Gaussian): the peak of p_theta(x) g(y - x) may then be between them."""
    q = info[2]
    gap = mech.tail(b, NOISE_TOLS[1])
    return (y < q[..., 0] - gap) | (y > q[..., -1] + gap)


def _middle_continuous(y, l, r, b, th, info, fam, mech, nodes, peak):
    """Nodes and log weights of the x-integral over [l, r] (see the module docstring);
    ``peak``: add breakpoints around the peak of the integrand (all elements far)."""
    s_lo, s_hi, q = info
    offs = noise_offsets(mech, b)
    reach = offs[..., -1]
    a = np.maximum(l, np.minimum(s_lo, y - reach))
    c = np.minimum(r, np.maximum(s_hi, y + reach))
    c = np.maximum(a, c)
    shape = np.broadcast_shapes(y.shape, a.shape, np.shape(q)[:-1])
    # the noise factor peaks at u = T_l^r(y) on [l, r] and decays on the scale b from it
    u = np.clip(y, l, r)[..., None]
    parts = [a[..., None], c[..., None], u, u - offs, u + offs, q]
    if peak:
        parts.append(_peak_breaks(np.ones(shape, bool), y, b, th, q, a, c, shape, fam, mech))
    pts = np.concatenate([np.broadcast_to(p, shape + (p.shape[-1],)) for p in parts], axis=-1)
    pts = np.sort(np.clip(pts, a[..., None], c[..., None]), axis=-1)
    return panel_nodes(pts, nodes)


_PEAK_STEPS = (-12.0, -8.0, -5.0, -3.0, -1.5, -0.5, 0.5, 1.5, 3.0, 5.0, 8.0, 12.0)


def _peak_breaks(far, y, b, th, q, a, c, shape, fam, mech):
    """Breakpoints around the peak of p_theta(x) g(y - x) for the elements in ``far`` (y
    well beyond the family's quantile range, see _far): the peak can then lie between
    them, where no other breakpoint is.  Golden-section search for it (between the
    outermost quantile and y; the maximum of a unimodal log f), a width w from the
    curvature there, and breaks at x* + w (+-0.5, ..., +-12) (log f falls by ~72 at 12 w
    for a concave log f); where no curvature is found, no extra breaks."""
    out = np.broadcast_to(a[..., None], shape + (len(_PEAK_STEPS),)).copy()
    yf = np.broadcast_to(y, shape)[far]
    bf = np.broadcast_to(b, shape)[far]
    qf = np.broadcast_to(q, shape + (q.shape[-1],))[far]
    thf = [np.broadcast_to(t, shape)[far] for t in th]
    af, cf = np.broadcast_to(a, shape)[far], np.broadcast_to(c, shape)[far]
    above = yf > qf[:, -1]
    lo = np.clip(np.where(above, qf[:, -1], yf), af, cf)
    hi = np.clip(np.where(above, yf, qf[:, 0]), af, cf)

    def logf(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            v = fam.logpdf(x, *thf) + mech.logpdf(yf - x, bf)
        return np.where(np.isnan(v), -np.inf, v)

    golden = 0.5 * (math.sqrt(5.0) - 1.0)
    x1 = hi - golden * (hi - lo)
    x2 = lo + golden * (hi - lo)
    f1, f2 = logf(x1), logf(x2)
    for _ in range(60):  # bracket shrinks to 0.618^60 ~ 3e-13 of its width
        left = f1 >= f2  # the maximum is in [lo, x2]: keep x1 as the new x2
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        keep_x, keep_f = np.where(left, x1, x2), np.where(left, f1, f2)
        new = np.where(left, hi - golden * (hi - lo), lo + golden * (hi - lo))
        fn = logf(new)
        x1, f1 = np.where(left, new, keep_x), np.where(left, fn, keep_f)
        x2, f2 = np.where(left, keep_x, new), np.where(left, keep_f, fn)
    xs = 0.5 * (lo + hi)
    h = 1e-4 * np.minimum(bf, qf[:, -1] - qf[:, 0])
    curv = -(logf(xs + h) - 2.0 * logf(xs) + logf(xs - h)) / (h * h)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = 1.0 / np.sqrt(curv)
    pts = xs[:, None] + w[:, None] * np.array(_PEAK_STEPS)
    ok = np.isfinite(pts).all(axis=1)
    out[far] = np.where(ok[:, None], pts, af[:, None])
    return out


# integers a discrete family's sum of eq. (7) may run over, per release: ~15 sd of a
# Poisson(lam) (lam up to ~4e7) or the interval's width where the mass is not located
MAX_TERMS = 100_000


def middle_discrete(l, r, info):
    """Integers strictly inside (l, r) within the support, as (k, log weight 0 or -inf);
    ValueError, before any allocation, when they are more than MAX_TERMS."""
    s_lo, s_hi, _ = info
    k_lo = np.maximum(np.floor(l) + 1.0, np.ceil(s_lo))
    k_hi = np.minimum(np.ceil(r) - 1.0, np.floor(s_hi))
    count = max(np.max(k_hi - k_lo, initial=-1.0) + 1.0, 1.0)
    if not count <= MAX_TERMS:
        raise ValueError(f"the likelihood sums over the {count:.3g} integers of the interval "
                         f"where the family has mass, more than dpbook's limit of "
                         f"{MAX_TERMS:,} (a Poisson mean above ~4e7): rescale the counts "
                         f"or narrow the interval")
    count = int(count)
    k = k_lo[..., None] + np.arange(count)
    logw = np.where(k <= k_hi[..., None], 0.0, -np.inf)
    return k, logw


def core(y, l, r, eps, th, info, fam, mech, want_score, nodes=None):
    """log p(y | theta) and (optionally) the score for broadcastable arrays, no checks.

    Elements whose y is far from the family's bulk (they need the peak search and more
    panels) are done apart from the others, so that they do not widen every row.
    """
    nodes = NODES if nodes is None else nodes
    y, l, r = (np.asarray(a, float) for a in (y, l, r))
    if fam.discrete:
        return _core_group(y, l, r, eps, th, info, fam, mech, want_score, nodes, False)
    far = _far(y, (r - l) / eps, info, mech)
    if not far.any() or far.all():
        return _core_group(y, l, r, eps, th, info, fam, mech, want_score, nodes, far.all())
    shape = far.shape
    nq = info[2].shape[-1]
    flat = [np.broadcast_to(a, shape).ravel() for a in (y, l, r, *th, info[0], info[1])]
    q = np.broadcast_to(info[2], shape + (nq,)).reshape(-1, nq)
    logp = np.empty(far.size)
    sc = np.empty((far.size, fam.dim)) if want_score else None
    for peak in (True, False):
        group = far.ravel() if peak else ~far.ravel()
        yg, lg, rg, *rest = (a[group] for a in flat)
        thg, infog = rest[:-2], (rest[-2], rest[-1], q[group])
        lp, s = _core_group(yg, lg, rg, eps, thg, infog, fam, mech, want_score, nodes, peak)
        logp[group] = lp
        if want_score:
            sc[group] = s
    return logp.reshape(shape), (sc.reshape(shape + (fam.dim,)) if want_score else None)


def _core_group(y, l, r, eps, th, info, fam, mech, want_score, nodes, peak):
    """_core for one group of elements (``peak``: all of them far)."""
    b = (r - l) / eps
    if fam.discrete:
        x, logw = middle_discrete(l, r, info)
    else:
        x, logw = _middle_continuous(y, l, r, b, th, info, fam, mech, nodes, peak)
    the = [np.asarray(t)[..., None] for t in th]
    with np.errstate(divide="ignore", invalid="ignore"):
        lt = fam.logpdf(x, *the)
        lt += logw
        lt += mech.logpdf(y[..., None] - x, b[..., None])
    if np.isnan(lt).any():
        lt[np.isnan(lt)] = -np.inf
    atoms = atom_masses(fam, l, r, th, want_score)
    la = atoms[0] + mech.logpdf(y - l, b)
    lb = atoms[1] + mech.logpdf(y - r, b)
    m = np.maximum(np.maximum(la, lb), np.max(lt, axis=-1))
    m = np.where(np.isfinite(m), m, 0.0)
    ea, eb = np.exp(la - m), np.exp(lb - m)
    lt -= m[..., None]
    e = np.exp(lt, out=lt)
    tot = ea + eb + np.sum(e, axis=-1)
    with np.errstate(divide="ignore"):
        logp = m + np.log(tot)
    if not want_score:
        return logp, None
    sc = fam.score(x, *the)
    inv = 1.0 / np.where(tot > 0, tot, np.inf)
    mid = np.stack([np.sum(e * np.nan_to_num(s), axis=-1) for s in sc], axis=-1)
    s = (ea[..., None] * atoms[2] + eb[..., None] * atoms[3] + mid) * inv[..., None]
    return logp, s


def _pointwise(y, l, r, eps, theta, family, mechanism, want_score):
    fam, mech = setup(family, mechanism)
    eps = check_eps(eps)
    y = check_finite("y", y)
    l, r = check_interval(l, r)
    th = check_theta(fam, theta)
    shape = np.broadcast_shapes(y.shape, l.shape, r.shape, *(t.shape for t in th))
    flat = [np.broadcast_to(a, shape).ravel() for a in (y, l, r, *th)]
    n = flat[0].size
    per = 3 * NODES * (_Q_LEVELS.size + 2 * len(NOISE_TOLS) + 4) if not fam.discrete else \
        max(64.0, min(float(np.max(r - l)), MAX_TERMS))  # integers summed per element
    step = max(1, int(CHUNK // per))
    lp = np.empty(n)
    sc = np.empty((n, fam.dim)) if want_score else None
    for i in range(0, n, step):
        yc, lc, rc, *tc = (a[i:i + step] for a in flat)
        info = theta_info(fam, tc)
        lpi, si = core(yc, lc, rc, eps, tc, info, fam, mech, want_score)
        lp[i:i + step] = lpi
        if want_score:
            sc[i:i + step] = si
    if want_score:
        return sc.reshape(shape + (fam.dim,))
    lp = lp.reshape(shape)
    return lp if lp.ndim else float(lp)


def log_density(y, l, r, eps, theta, family=None, mechanism="laplace"):
    """log p_{l,r}^eps(y | theta) of one release Y = T_l^r(X) + (r - l)/eps V.

    The density of eq. (7) (and the likelihood factor of eq. 5 with x integrated out):
    p(y) = P(X <= l) g(y - l) + P(X >= r) g(y - r) + int_l^r p_theta(x) g(y - x) dx, a
    sum over the integers in (l, r) for a discrete family; computed by Gauss-Legendre
    panels in log space (module docstring).  Broadcasts over y, l, r and theta (a tuple,
    one scalar or array per parameter); ``family`` a Family or name (None: normal),
    ``mechanism`` 'laplace', 'gaussian' or a Mechanism.
    """
    return _pointwise(y, l, r, eps, theta, family, mechanism, False)


def score(y, l, r, eps, theta, family=None, mechanism="laplace"):
    """grad_theta log p_{l,r}^eps(y | theta), shape (..., d), by Fisher's identity.

    Appendix C (the identity behind Algorithm 4): the score is E[grad log p_theta(X) |
    Y = y], i.e. [grad P(X <= l) g(y - l) + grad P(X >= r) g(y - r) +
    int p_theta(x) grad log p_theta(x) g(y - x) dx] / p(y), the masses' gradients from
    ``family.cdf_grad`` (for a discrete family P(X >= r) = 1 - P(X <= ceil(r) - 1)).
    Same quadrature as :func:`log_density`.
    """
    return _pointwise(y, l, r, eps, theta, family, mechanism, True)
