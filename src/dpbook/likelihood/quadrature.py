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
from dpbook.model.mechanisms import GaussianMechanism, LaplaceMechanism, get_mechanism
from dpbook.validation import (
    check_eps,
    check_finite,
    check_interval,
)

__all__ = ["log_density", "score", "fisher_exact"]

NODES = 10  # Gauss-Legendre nodes per x panel (pointwise density and score)
FISHER_NODES = 8  # Gauss-Legendre nodes per y panel of the Fisher integral
_CUT_NODES = 4  # x nodes between consecutive cuts of the Laplace running sums
_SUPPORT_TAIL = 1e-14  # family.support(theta, tail): x outside carries negligible mass
_Q_LEVELS = np.array([1e-12, 1e-9, 1e-6, 1e-4, 1e-3, 0.01, 0.05, 0.15, 0.3, 0.5,
                      0.7, 0.85, 0.95, 0.99, 0.999, 1 - 1e-4, 1 - 1e-6, 1 - 1e-9, 1 - 1e-12])
# noise half-widths mechanism.tail(b, tol): Laplace b (2, 6, 15, 39), Gaussian b (2, 3.5,
# 5.5, 8.7): across a panel the noise factor falls by a bounded amount
NOISE_TOLS = (math.exp(-2.0), math.exp(-6.0), math.exp(-15.0), 1e-17)
_UNIFORM_SPACING = 2.0  # largest Fisher panel, in noise scales b, inside the support
# largest uniform grid of the Fisher rules: the running sums (Laplace) cost O(grid), the
# matrix rule O(grid^2); eps beyond ~2 x the cap needs a finer grid than the cap allows
_MAX_UNIFORM = 20_000
_MAX_UNIFORM_MATRIX = 400
CHUNK = 300_000  # elements per chunk of the pointwise rule (cache-sized: ~2x faster)
_FISHER_CHUNK = 1_000_000  # elements per chunk of the Fisher rules

_GL_CACHE: dict = {}


def _gl(n):
    """Gauss-Legendre nodes and weights on [-1, 1]."""
    if n not in _GL_CACHE:
        _GL_CACHE[n] = np.polynomial.legendre.leggauss(n)
    return _GL_CACHE[n]


# ------------------------------------------------------------------------- inputs


def setup(family, mechanism):
    return as_family(family), get_mechanism(mechanism)


def _check_theta(fam, theta):
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


def _noise_offsets(mech, b):
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


def _atoms(fam, l, r, th, want_grad):
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


def _compact(pts):
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


def _panel_nodes(pts, n, compact=True):
    """Sorted breakpoints (..., k) -> Gauss-Legendre nodes and log weights (..., (k-1) n)."""
    if compact:
        pts = _compact(pts)
    x, w = _gl(n)
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
    offs = _noise_offsets(mech, b)
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
    return _panel_nodes(pts, nodes)


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


def _middle_discrete(l, r, info):
    """Integers strictly inside (l, r) within the support, as (k, log weight 0 or -inf)."""
    s_lo, s_hi, _ = info
    k_lo = np.maximum(np.floor(l) + 1.0, np.ceil(s_lo))
    k_hi = np.minimum(np.ceil(r) - 1.0, np.floor(s_hi))
    count = int(max(np.max(k_hi - k_lo, initial=-1.0) + 1.0, 1.0))
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
        x, logw = _middle_discrete(l, r, info)
    else:
        x, logw = _middle_continuous(y, l, r, b, th, info, fam, mech, nodes, peak)
    the = [np.asarray(t)[..., None] for t in th]
    with np.errstate(divide="ignore", invalid="ignore"):
        lt = fam.logpdf(x, *the)
        lt += logw
        lt += mech.logpdf(y[..., None] - x, b[..., None])
    if np.isnan(lt).any():
        lt[np.isnan(lt)] = -np.inf
    atoms = _atoms(fam, l, r, th, want_score)
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
    th = _check_theta(fam, theta)
    shape = np.broadcast_shapes(y.shape, l.shape, r.shape, *(t.shape for t in th))
    flat = [np.broadcast_to(a, shape).ravel() for a in (y, l, r, *th)]
    n = flat[0].size
    per = 3 * NODES * (_Q_LEVELS.size + 2 * len(NOISE_TOLS) + 4) if not fam.discrete else 64
    step = max(1, CHUNK // per)
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


# --------------------------------------------------------------------------- Fisher


def _fisher_breaks(l, r, b, info, fam, mech, outer, cap):
    """Sorted y-panel breakpoints (P, K) of the Fisher integral.

    l, r +- the noise half-widths, the family's quantiles and a uniform grid of spacing
    <= 2b over [l, r] cut to the support (the features of p(y) have width ~b); the
    integers in (l, r) for a discrete family (kinks of p(y)).  ``outer``: also the
    tails out to mechanism.tail(b, 1e-16); else everything is clipped to [l, r].
    """
    s_lo, s_hi, q = info
    offs = _noise_offsets(mech, b)
    a = np.clip(s_lo, l, r)
    c = np.clip(s_hi, l, r)
    parts = [l[:, None], r[:, None], l[:, None] + offs, r[:, None] - offs]
    if q is not None:
        parts.append(np.broadcast_to(q, (l.size, q.size)))
    n_raw = np.max(np.ceil((c - a) / (_UNIFORM_SPACING * b)), initial=0) + 1
    n_u = int(min(n_raw, cap))
    uniform = True
    if fam.discrete:
        k, logw = _middle_discrete(l, r, info)
        k = np.where(np.isfinite(logw), k, l[:, None])
        parts.append(k)
        if n_raw > min((1 + 2 * offs.shape[-1]) * k.shape[-1], cap):
            # b << 1: p(y) is a comb of width-b peaks; break around each integer instead
            uniform = False
            parts += [(k[:, :, None] + sgn * offs[:, None, :]).reshape(l.size, -1)
                      for sgn in (-1.0, 1.0)]
    if uniform:
        parts.append(a[:, None] + (c - a)[:, None] * np.linspace(0.0, 1.0, max(n_u, 2)))
    lo, hi = l, r
    if outer:
        t = mech.tail(b, 1e-16)
        lo, hi = l - t, r + t
        parts += [lo[:, None], hi[:, None], l[:, None] - offs, r[:, None] + offs]
    pts = np.concatenate(parts, axis=-1)
    return np.sort(np.clip(pts, lo[:, None], hi[:, None]), axis=-1)


def _scaled_x_values(x, logw, th, fam, shift=None):
    """w p_theta(x) (1, score(x)) / e^shift on x nodes (P, M): (P, M, 1 + d) and shift."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lpx = logw + fam.logpdf(x, *th)
    lpx = np.where(np.isnan(lpx), -np.inf, lpx)
    if shift is None:
        shift = np.max(lpx, axis=-1)
        shift = np.where(np.isfinite(shift), shift, 0.0)
    f = np.exp(lpx - shift[:, None])
    comps = [np.ones_like(x)] + [np.nan_to_num(np.broadcast_to(s, x.shape))
                                 for s in fam.score(x, *th)]
    return f[..., None] * np.stack(comps, axis=-1), shift


def _atom_vectors(fam, l, r, th, shift):
    """(M_l, grad M_l) and (M_r, grad M_r), scaled by e^-shift: two (P, 1 + d) arrays."""
    lml, lmr, gl, gr = _atoms(fam, l, r, th, True)
    ml = np.exp(lml - shift)
    mr = np.exp(lmr - shift)
    return (ml[:, None] * np.concatenate([np.ones((l.size, 1)), gl], axis=-1),
            mr[:, None] * np.concatenate([np.ones((l.size, 1)), gr], axis=-1))


def _outer_sum(w, v):
    """sum_j w_j p_j s_j s_j^T, p_j = v_j[0] and s_j = v_j[1:]/p_j (the score), over the
    last-but-one axis; v (P, J, 1 + d).  Nodes with p < 1e-280 (relative to the largest
    density ~1 after scaling) contribute nothing and are skipped, not divided by."""
    p = v[..., 0]
    ok = p > 1e-280
    s = v[..., 1:] / np.where(ok, p, 1.0)[..., None]
    return np.einsum("pj,pji,pjk->pik", np.where(ok, w * p, 0.0), s, s)


def _sums(w, v):
    """sum_j w_j (p_j, grad p_j) over the last-but-one axis of v (P, J, 1 + d): the
    integrals of p(y) (1 in exact arithmetic) and of grad p(y) (0: the score has mean
    0), which tell how accurately the rule resolved the score (:func:`fisher_exact`)."""
    return np.einsum("pj,pjc->pc", w, v)


def _fisher_laplace(l, r, eps, th, info, fam, mech):
    """F for a continuous family under the Laplace mechanism (running sums; exact tails)."""
    b = (r - l) / eps
    pts = _compact(_fisher_breaks(l, r, b, info, fam, mech, False, _MAX_UNIFORM))
    n = FISHER_NODES
    ynode, ylogw = _panel_nodes(pts, n, compact=False)  # (P, (K - 1) n)
    P, K = pts.shape
    # cuts: each breakpoint followed by its panel's nodes, then the last breakpoint
    cuts = np.concatenate([pts[:, :-1, None], ynode.reshape(P, K - 1, n)], axis=-1)
    cuts = np.concatenate([cuts.reshape(P, -1), pts[:, -1:]], axis=-1)
    y_idx = (np.arange(K - 1)[:, None] * (n + 1) + 1 + np.arange(n)).ravel()
    # x rule: _CUT_NODES Gauss-Legendre nodes between consecutive cuts
    x, xlogw = _panel_nodes(cuts, _CUT_NODES, compact=False)
    v, shift = _scaled_x_values(x, xlogw, [np.asarray(t) for t in th], fam)
    m = cuts.shape[1] - 1
    v = v.reshape(P, m, _CUT_NODES, -1)
    xs = x.reshape(P, m, _CUT_NODES)
    inv_b = (1.0 / b)[:, None]
    # int over a cut panel of p (1, s) e^{(x - right end)/b} and e^{(left end - x)/b}
    i_minus = np.einsum("pmn,pmnc->pmc", np.exp((xs - cuts[:, 1:, None]) * inv_b[..., None]), v)
    i_plus = np.einsum("pmn,pmnc->pmc", np.exp((cuts[:, :-1, None] - xs) * inv_b[..., None]), v)
    decay = np.exp(-np.diff(cuts, axis=-1) * inv_b)[..., None]
    acc = np.zeros((P, m + 1, v.shape[-1]))
    for j in range(m):  # A at cut j + 1: everything to its left
        acc[:, j + 1] = decay[:, j] * acc[:, j] + i_minus[:, j]
    run = np.zeros_like(acc[:, 0])
    for j in range(m - 1, -1, -1):  # B at cut j: everything to its right
        run = decay[:, j] * run + i_plus[:, j]
        acc[:, j] += run
    vl, vr = _atom_vectors(fam, l, r, th, shift)
    g_l = np.exp(-(cuts - l[:, None]) * inv_b)
    g_r = np.exp(-(r[:, None] - cuts) * inv_b)
    tot = (acc + g_l[..., None] * vl[:, None] + g_r[..., None] * vr[:, None]) \
        / (2.0 * b)[:, None, None]
    f = _outer_sum(np.exp(ylogw), tot[:, y_idx])
    g = _sums(np.exp(ylogw), tot[:, y_idx])
    # tails: for y <= l, p(y) = p(l) e^{(y - l)/b} and s(y) = s(l); likewise above r
    f += _outer_sum(np.broadcast_to(b[:, None], (P, 2)), tot[:, [0, -1]])
    g += _sums(np.broadcast_to(b[:, None], (P, 2)), tot[:, [0, -1]])
    return f * np.exp(shift)[:, None, None], g * np.exp(shift)[:, None]


def _fisher_matrix(l, r, eps, th, info, fam, mech):
    """F for any family and mechanism: a fixed x rule and a matrix of noise densities."""
    b = (r - l) / eps
    pts = _fisher_breaks(l, r, b, info, fam, mech, True, _MAX_UNIFORM_MATRIX)
    ynode, ylogw = _panel_nodes(pts, FISHER_NODES)
    if fam.discrete:
        x, xlogw = _middle_discrete(l, r, info)
    else:
        inner = _fisher_breaks(l, r, b, info, fam, mech, False, _MAX_UNIFORM_MATRIX)
        s_lo, s_hi, _ = info
        a = np.clip(s_lo, l, r)[:, None]
        c = np.clip(s_hi, l, r)[:, None]
        if mech.kink:  # y nodes as cuts: the kink at x = y is a panel end
            inner = np.sort(np.concatenate([inner, np.clip(ynode, l[:, None], r[:, None])],
                                           axis=-1), axis=-1)
        x, xlogw = _panel_nodes(np.clip(inner, a, c), FISHER_NODES)
    v, shift = _scaled_x_values(x, xlogw, [np.asarray(t) for t in th], fam)
    if isinstance(mech, GaussianMechanism):  # the same kernel in fewer passes
        z = (ynode / b[:, None])[:, :, None] - (x / b[:, None])[:, None, :]
        z *= z
        z *= -0.5
        g = np.exp(z, out=z)
        v = v / (b * math.sqrt(2 * math.pi))[:, None, None]
    else:
        g = np.exp(mech.logpdf(ynode[:, :, None] - x[:, None, :], b[:, None, None]))
    tot = np.matmul(g, v)
    vl, vr = _atom_vectors(fam, l, r, th, shift)
    tot += mech.pdf(ynode - l[:, None], b[:, None])[..., None] * vl[:, None]
    tot += mech.pdf(ynode - r[:, None], b[:, None])[..., None] * vr[:, None]
    f = _outer_sum(np.exp(ylogw), tot)
    return (f * np.exp(shift)[:, None, None],
            _sums(np.exp(ylogw), tot) * np.exp(shift)[:, None])


_SMALL_STEPS = np.array([0.0, 1.0, 3.0, 7.0, 15.0])  # geometric panels, in noise scales
_SMALL_NODES = 16  # Gauss-Legendre nodes per panel of the small-noise rule
_SMALL_INTERIOR = 48  # panels between the clip points' neighbourhoods


def _geometric(centre, b, U, sign):
    """Panel ends centre + sign b (0, 1, 3, 7, 15, U): (P, 6), ascending if sign > 0."""
    steps = np.concatenate([_SMALL_STEPS, [U]])
    return centre[:, None] + sign * b[:, None] * steps


def _fisher_small_noise(l, r, eps, th, info, fam, mech):
    """F for a continuous family when the noise scale b is far below the interval: the
    rule for large eps, whose cost does not grow with eps.

    p(y) = M_l f_b(y - l) + M_r f_b(y - r) + int_l^r p(x) f_b(y - x) dx; in the integral
    x = y - b u, so that it runs over the noise u with the noise's own panels
    (geometric: 0, 1, 3, 7, 15 and the noise's 1e-16 tail, on both sides of 0), truncated
    to (y - r)/b < u < (y - l)/b; the score is the same sum with p(x) grad log p(x) and
    the masses' gradients (Fisher's identity).  The y-integral has geometric panels on
    both sides of l and r (the spikes of width b there) and _SMALL_INTERIOR panels
    between, cut at the family's quantiles; outside [l - U b, r + U b] p(y) < 1e-16.
    """
    b = (r - l) / eps
    U = float(mech.tail(1.0, 1e-16))
    # ---- y nodes
    lo_in, hi_in = l + U * b, r - U * b
    inner = lo_in[:, None] + (hi_in - lo_in)[:, None] * np.linspace(0, 1, _SMALL_INTERIOR + 1)
    parts = [_geometric(l, b, U, -1.0)[:, ::-1], _geometric(l, b, U, 1.0), inner,
             _geometric(r, b, U, -1.0)[:, ::-1], _geometric(r, b, U, 1.0)]
    s_lo, s_hi, q = info
    if q is not None:
        parts.append(np.clip(np.broadcast_to(q, (l.size, q.size)), lo_in[:, None],
                             hi_in[:, None]))
    pts = np.sort(np.concatenate(parts, axis=-1), axis=-1)
    yn, ylogw = _panel_nodes(pts, _SMALL_NODES, compact=False)  # (P, J)
    P, J = yn.shape
    # ---- u nodes for every y: panels on each side of 0, truncated to the x-range
    side = np.concatenate([_SMALL_STEPS, [U]])
    edges = np.concatenate([-side[::-1], side[1:]])  # -U .. 0 .. U
    u_lo = ((yn - r[:, None]) / b[:, None])[..., None]
    u_hi = ((yn - l[:, None]) / b[:, None])[..., None]
    e = np.clip(edges, u_lo, u_hi)  # (P, J, E)
    xg, wg = _gl(_SMALL_NODES)
    half = 0.5 * np.diff(e, axis=-1)  # (P, J, E - 1)
    u = (0.5 * (e[..., 1:] + e[..., :-1]))[..., None] + half[..., None] * xg  # (P, J, E-1, n)
    with np.errstate(all="ignore"):  # zero-width panels (truncated) get weight 0
        lw = np.log(half[..., None] * wg) + mech.logpdf(u, 1.0)
    lw = np.where(half[..., None] > 0, lw, -np.inf).reshape(P, -1)
    x = (yn[..., None, None] - b[:, None, None, None] * u).reshape(P, -1)
    v, shift = _scaled_x_values(x, lw, [np.asarray(t) for t in th], fam)
    tot = v.reshape(P, J, -1, v.shape[-1]).sum(axis=2)
    vl, vr = _atom_vectors(fam, l, r, th, shift)
    tot += mech.pdf(yn - l[:, None], b[:, None])[..., None] * vl[:, None]
    tot += mech.pdf(yn - r[:, None], b[:, None])[..., None] * vr[:, None]
    f = _outer_sum(np.exp(ylogw), tot)
    return (f * np.exp(shift)[:, None, None],
            _sums(np.exp(ylogw), tot) * np.exp(shift)[:, None])


def fisher_exact(l, r, eps, theta=None, family=None, mechanism="laplace"):
    """Fisher information F_{l,r}^eps(theta) of eq. (7) by quadrature: E[s(Y) s(Y)^T].

    s is the score of :func:`score` (Fisher's identity), Y one release at theta; the
    deterministic counterpart of the Monte Carlo estimate (8) with Algorithm 4.  The
    y-integral is done as described in the module docstring (exact tails and running
    x-sums for the Laplace mechanism, a matrix of noise densities otherwise).  theta
    defaults to (0, 1) for a location-scale family (by Theorem 3 the information at
    (m, c) is F_{(l - m)/c, (r - m)/c}(0, 1)/c^2) and to ``family.default_theta()``
    otherwise.  Vectorised over l, r (broadcast): output (d, d) or (..., d, d).
    """
    fam, mech = setup(family, mechanism)
    eps = check_eps(eps)
    l, r = check_interval(l, r)
    if theta is None:
        theta = (0.0, 1.0) if fam.location_scale else fam.default_theta()
    th = _check_theta(fam, theta)
    if any(np.ndim(t) for t in th):
        raise ValueError("fisher_exact needs one theta (a tuple of scalars)")
    th = tuple(float(t) for t in th)
    shape = np.broadcast_shapes(l.shape, r.shape)
    lf = np.broadcast_to(l, shape).ravel()
    rf = np.broadcast_to(r, shape).ravel()
    info = theta_info(fam, th)
    if not np.all(np.isfinite(np.asarray(info[:2], dtype=float))):
        raise ValueError(unlocated_message(fam, th))
    if not fam.discrete:
        info = (float(info[0]), float(info[1]), np.asarray(info[2]).ravel())
    laplace = isinstance(mech, LaplaceMechanism) and not fam.discrete
    run = _fisher_laplace if laplace else _fisher_matrix
    out = np.empty((lf.size, fam.dim, fam.dim))
    b = (rf - lf) / eps
    s_lo, s_hi = info[0], info[1]
    width = np.clip(s_hi, lf, rf) - np.clip(s_lo, lf, rf)
    need = float(np.max(width / (_UNIFORM_SPACING * b), initial=0.0))
    cap = _MAX_UNIFORM if laplace else _MAX_UNIFORM_MATRIX
    if need > cap and not fam.discrete:
        # b far below the interval: the rule whose cost does not grow with eps
        run = _fisher_small_noise
        need = 0.0
    # elements per pair: ~ (breaks x nodes) y nodes times x nodes for the matrix rule
    k_est = 40 + min(cap, need)
    if fam.discrete:
        count = float(min(np.max(rf - lf), s_hi - s_lo)) + 1
        if not count <= MAX_INTEGERS:  # also nan: the family's quantiles failed
            where = "cannot be located (its quantiles are not finite there)" if \
                math.isnan(count) else f"spans {count:.3g} integers"
            raise ValueError(
                f"the exact Fisher information of the {fam.describe()} family at "
                f"{', '.join(f'{q} = {v:g}' for q, v in zip(fam.params, th))} sums over "
                f"the integers where it has mass, which {where}, more than the "
                f"{MAX_INTEGERS} its quadrature holds in memory; use method='mc'")
        k_est += 9 * (float(min(np.max(rf - lf), s_hi - s_lo)) + 1)
    per = (k_est * FISHER_NODES) * (_CUT_NODES * 4 if laplace else k_est * FISHER_NODES)
    step = max(1, int(_FISHER_CHUNK // per))
    for i in range(0, lf.size, step):
        f, g = run(lf[i:i + step], rf[i:i + step], eps, th, info, fam, mech)
        out[i:i + step] = resolve(0.5 * (f + np.swapaxes(f, -1, -2)), g, lf[i:i + step],
                                  rf[i:i + step], eps, fam,
                                  _second_try(lf[i:i + step], rf[i:i + step], eps, th, info,
                                              fam, mech))
    return out.reshape(shape + (fam.dim, fam.dim))


def _second_try(l, r, eps, th, info, fam, mech):
    """k -> (F, g) of element k by adaptive quadrature (:mod:`dpbook.likelihood.adaptive`)
    from the pointwise density and score of one release: compiled where the engine
    compiles the family (:func:`_compiled_pointwise`), else this module's."""
    from dpbook.likelihood.adaptive import fisher_adaptive

    def run(k):
        lk, rk = float(l[k]), float(r[k])
        compiled = _compiled_pointwise(fam, mech, th)  # asked only when needed: compiling

        def pointwise(y):
            if compiled is not None:
                return compiled(y, lk, rk, eps)
            return (log_density(y, lk, rk, eps, th, fam, mech),
                    score(y, lk, rk, eps, th, fam, mech))

        bulk = [] if info[2] is None else np.asarray(info[2], float).ravel()
        if fam.discrete:  # the integers where the family has mass
            lo, hi = max(lk, float(info[0])), min(rk, float(info[1]))
            bulk = np.arange(math.ceil(lo), math.floor(hi) + 1.0) if hi - lo < 3000 else []
        return fisher_adaptive(pointwise, lk, rk, (rk - lk) / eps, fam.dim, mech, bulk)
    return run


def _compiled_pointwise(fam, mech, th):
    """(y, l, r, eps) -> (log p(y | th), s(y | th) (n, 2)) for an array y, from the
    engine's compiled likelihood terms and score (:mod:`dpbook.likelihood.compiled_quadrature`), or
    None where the engine does not compile this model.  The adaptive second try asks for
    thousands of single points: compiled, each costs microseconds, not the numpy rule's
    millisecond (Student-t on [-1e3, 1e3], Gaussian noise: 8 s a call before)."""
    from dpbook.backends import backend

    if not fam.location_scale:
        return None
    terms, one = backend("loglik_terms", fam, mech), backend("score", fam, mech)
    if terms is None or one is None:
        return None
    theta = np.array([th], dtype=float)

    def pointwise(y, l, r, eps):
        y = np.atleast_1d(np.asarray(y, dtype=float))
        lp = terms(y, np.full(y.shape, l), np.full(y.shape, r), eps, theta)[:, 0]
        return lp, np.array([one(v, l, r, eps, *th) for v in y]).reshape(y.size, 2)
    return pointwise


# the score's computed mean, which is 0 in exact arithmetic, may be at most this fraction
# of its root mean square: a bias delta in the score adds delta^2 to F's diagonal, so F_jj
# keeps a floor of at most 1% of its value.  (Student-t with df 0.1 on [-1e6, 1e6] kept
# F[scale, scale] = 3.1e-7, the square of its mean score 5.5e-4, for every eps below
# 1e-2, where F must fall to 0 with eps.)
SCORE_MEAN_TOL = 0.1
# ... unless the floor is below this fraction of F's largest diagonal entry: an entry that
# small (F[sigma, sigma] of an interval symmetric about mu, which is 0 by symmetry as the
# interval shrinks) is returned to that absolute accuracy
FLOOR_REL = 1e-12
MASS_TOL = 1e-6  # the density of Y must integrate to 1 within this (the rules reach
# 1e-11 on the book's grids; Y = N(0, 1) + N(0, 2^2) on [-1e3, 1e3] lost 3.4e-4 of its mass
# beyond the support's last panel, and F[mu, mu] was 0.8% off, F[sigma, sigma] 5%)


def unlocated_message(fam, th) -> str:
    """The error for a theta where ``fam``'s quantile function is not finite (the
    Poisson's from lam ~ 1e11, scipy's limit): nothing can be computed there."""
    at = ", ".join(f"{q} = {v:g}" for q, v in zip(fam.params, th))
    return (f"the {fam.describe()} family cannot locate its mass at {at}: its quantile "
            f"function is not finite there, so this theta is outside what dpbook computes")


# integers in (l, r) where a discrete family has mass, at most: the matrix rule holds
# (8 y nodes per integer) x (integers) noise densities per interval
MAX_INTEGERS = 3000


def resolve(F, g, l, r, eps, family, second_try):
    """:func:`check_resolved` after a second try: each element of F (P, d, d) whose
    integrals g (P, 1 + d) fail the check is computed again by ``second_try(k)`` ->
    (F_k, g_k) (:mod:`dpbook.likelihood.adaptive`) and replaced when that passes; the
    elements that pass at once keep their bits.  ValueError for what fails both."""
    bad = _unresolved(F, g)
    if not bad.any():
        return F
    F, g = F.copy(), g.copy()
    for k in np.flatnonzero(bad):
        Fk, gk = second_try(int(k))
        if np.all(np.isfinite(Fk)) and not _unresolved(Fk[None], gk[None])[0]:
            F[k], g[k] = Fk, gk
    check_resolved(F, g, l, r, eps, family)
    return F


def _check_terms(F, g):
    """The check of :func:`check_resolved`: (bad (P, d), mass, mean, diag), ``bad`` where
    an element of F (P, d, d) fails for a parameter."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mass = g[:, 0]
        mean = g[:, 1:] / mass[:, None]
        diag = np.diagonal(F, axis1=-2, axis2=-1)
        floor = mean * mean
        bad = ~(np.abs(mass - 1.0) <= MASS_TOL)[:, None] | ~(
            (floor <= SCORE_MEAN_TOL ** 2 * diag)
            | (floor <= FLOOR_REL * np.max(diag, axis=-1, keepdims=True)))
    return bad, mass, mean, diag


def _unresolved(F, g):
    """Which elements of F (P, d, d) fail the check of :func:`check_resolved`, (P,)."""
    return _check_terms(F, g)[0].any(axis=-1)


def check_resolved(F, g, l, r, eps, family):
    """ValueError when a Fisher rule did not resolve the score: F (P, d, d) came with
    g (P, 1 + d), its integrals of p(y) and grad p(y); the score's computed mean
    (g[:, 1:] / g[:, 0], 0 in exact arithmetic) must be negligible beside its root mean
    square sqrt(F_jj) and the density must integrate to 1 (g[:, 0]).  Also the check of
    the closed form (:mod:`dpbook.likelihood.normal_laplace`).  ``eps`` a scalar or one
    per element."""
    fam = as_family(family)
    eps = np.broadcast_to(np.asarray(eps, dtype=float), (F.shape[0],))
    bad, mass, mean, diag = _check_terms(F, g)
    if not bad.any():
        return
    i = int(np.flatnonzero(bad.any(axis=-1))[0])
    where = (f"the Fisher information of the {fam.describe()} family cannot be computed "
             f"accurately for [l, r] = [{l[i]:g}, {r[i]:g}] at eps = {eps[i]:g}")
    if not abs(mass[i] - 1.0) <= MASS_TOL:
        why = f"the density of a release integrates to {mass[i]:.6g} in its quadrature, not 1"
    else:
        j = int(np.argmax(np.abs(mean[i]) / np.sqrt(np.maximum(diag[i], 1e-300))))
        why = (f"the quadrature's score for {fam.params[j]} has mean {mean[i, j]:.2g} (0 in "
               f"exact arithmetic), not negligible beside its root mean square "
               f"{math.sqrt(max(diag[i, j], 0.0)):.2g}, so F[{fam.params[j]}, "
               f"{fam.params[j]}] would be a numerical floor")
    raise ValueError(f"{where}: {why}; use a narrower interval, another eps or the Monte "
                     f"Carlo method (method='mc')")
