"""Test oracle: the exact posterior, eq. (5), on a grid for any family and mechanism, by
numpy quadrature (the generic pipeline that ran every family but the paper's before the
one compiled pipeline of dpbook.posterior.exact; kept as the independent reference).

p(theta | y_{1:n}) is proportional to eta(theta) prod_t p(y_t | theta), each factor the
density of one release with x_t integrated out numerically
(:mod:`dpbook.likelihood.quadrature`).  :func:`dpbook.posterior.exact_posterior` runs
this for every model without a registered backend.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpbook.likelihood.quadrature import (
    CHUNK,
    NOISE_TOLS,
    core,
    setup,
    theta_info,
)
from dpbook.posterior.grid_density import GridPosterior
from dpbook.validation import check_count, check_eps, check_observations

POSTERIOR_NODES = 8  # x nodes a panel for the likelihood on a grid (log p error ~1e-9)
_POST_LEVELS = np.array([1e-9, 1e-4, 0.01, 0.15, 0.5, 0.85, 0.99, 1 - 1e-4, 1 - 1e-9])
_DROP = 25.0  # the box holds where the log posterior is within this of its maximum
_SCAN = 21  # coarse scan points per parameter while the box is searched
_SCAN_NODES = 6  # x nodes a panel while it is searched (log p error ~1e-8)
_MAX_BOX_STEPS = 60


def _loglik(cols, y, l, r, eps, fam, mech, nodes):
    """sum_t log p(y_t | theta_g) for theta given as flat columns (G,)."""
    g = cols[0].size
    per = y.size * (3 * nodes * (_POST_LEVELS.size + 2 * len(NOISE_TOLS) + 4)
                    if not fam.discrete else 64)
    step = max(1, int(CHUNK // per))
    out = np.empty(g)
    for i in range(0, g, step):
        th = [c[i:i + step, None] for c in cols]
        info = theta_info(fam, th, _POST_LEVELS)
        lp, _ = core(y[None], l[None], r[None], eps, th, info, fam, mech, False, nodes)
        out[i:i + step] = np.sum(lp, axis=-1)
    return out


def _log_post_grid(axes, y, l, r, eps, fam, mech, nodes):
    mesh = np.meshgrid(*axes, indexing="ij")
    cols = [m.ravel() for m in mesh]
    with np.errstate(divide="ignore", invalid="ignore"):
        lp = _loglik(cols, y, l, r, eps, fam, mech, nodes) + np.asarray(fam.log_prior(*cols))
    lp = np.where(np.isnan(lp), -np.inf, lp)
    return lp.reshape(mesh[0].shape)


def _auto_box(y, l, r, eps, fam, mech, nodes):
    """Box [lo_j, hi_j] in theta holding {log post > max - 25} with a margin.

    Coordinates u_j = log theta_j for positive parameters, theta_j otherwise.  On a
    21-point scan of the box: a side that the region touches moves out (the box doubles
    that way); otherwise the box closes to one scan step beyond the region, which zooms
    in while the region spans fewer than 5 steps.
    """
    pos = np.array(fam.positive, bool)
    guess = np.array(fam.check_theta(*fam.guess(y, l, r, eps, mech)), float)
    centre = np.array([math.log(g) if ps else g for g, ps in zip(guess, pos)])
    half = np.where(pos, 1.0, np.maximum(1.0, 0.5 * np.abs(guess)))
    lo, hi = centre - half, centre + half
    for _ in range(_MAX_BOX_STEPS):
        us = [np.linspace(a, b, _SCAN) for a, b in zip(lo, hi)]
        axes = [np.exp(u) if p else u for u, p in zip(us, pos)]
        lp = _log_post_grid(axes, y, l, r, eps, fam, mech, nodes)
        # density w.r.t. du (Jacobian theta_j): bounded region even where the density
        # in theta stays positive as a positive parameter -> 0
        lp = lp + sum(np.expand_dims(u, [k for k in range(len(us)) if k != j])
                      for j, (u, p) in enumerate(zip(us, pos)) if p)
        if not np.any(np.isfinite(lp)):
            lo, hi = lo - (hi - lo), hi + (hi - lo)
            continue
        region = lp >= np.max(lp) - _DROP
        top = np.unravel_index(np.argmax(lp), lp.shape)
        done = True
        for j in range(len(us)):
            proj = np.any(np.moveaxis(region, j, 0).reshape(_SCAN, -1), axis=1)
            idx = np.flatnonzero(proj)
            i0, i1 = idx[0], idx[-1]
            # a touched side moves out to twice its distance from the maximum, by at
            # least a quarter of the box (the whole box if the maximum is on that side)
            width = hi[j] - lo[j]
            u_top = us[j][top[j]]
            step_lo = width if top[j] == 0 else max(u_top - lo[j], 0.25 * width)
            step_hi = width if top[j] == _SCAN - 1 else max(hi[j] - u_top, 0.25 * width)
            new_lo = lo[j] - step_lo if i0 == 0 else us[j][i0 - 1]
            new_hi = hi[j] + step_hi if i1 == _SCAN - 1 else us[j][i1 + 1]
            if i0 == 0 or i1 == _SCAN - 1 or i1 - i0 < 5:
                done = False
            lo[j], hi[j] = new_lo, new_hi
        if done:
            break
    return [(math.exp(a), math.exp(b)) if p else (a, b) for a, b, p in zip(lo, hi, pos)]


def _log_post_u(u, y, l, r, eps, fam, mech, nodes):
    """log posterior density at one point u (coordinates of :func:`_auto_box`: log theta_j
    for a positive parameter, with the Jacobian), -inf outside the support."""
    pos = fam.positive
    with np.errstate(over="ignore"):  # a step far out: exp overflows to inf, density 0
        axes = [np.exp([v]) if p else np.array([v], float) for v, p in zip(u, pos)]
    if not all(np.isfinite(a).all() for a in axes):
        return -math.inf
    lp = float(_log_post_grid(axes, y, l, r, eps, fam, mech, nodes).ravel()[0])
    return lp + sum(v for v, p in zip(u, pos) if p)


def _mode_scale(start, y, l, r, eps, fam, mech, nodes):
    """The posterior mode in u from ``start`` (Nelder-Mead) and a scale per axis: the
    Laplace sd from a finite-difference Hessian, or 1e-2 where it is not negative
    definite there."""
    from scipy import optimize

    def f(u):
        v = _log_post_u(u, y, l, r, eps, fam, mech, nodes)
        return -v if math.isfinite(v) else 1e300

    res = optimize.minimize(f, start, method="Nelder-Mead",
                            options=dict(xatol=1e-4, fatol=1e-6, maxiter=400))
    mode = res.x if res.fun < f(start) else np.asarray(start, float)
    d, h = len(mode), 1e-3
    hess = np.empty((d, d))
    f0 = f(mode)
    for a in range(d):
        for b in range(a, d):
            ea, eb = np.eye(d)[a] * h, np.eye(d)[b] * h
            hess[a, b] = hess[b, a] = (f(mode + ea + eb) - f(mode + ea - eb)
                                       - f(mode - ea + eb) + f(mode - ea - eb)) / (4 * h * h)
    try:
        cov = np.linalg.inv(hess)
        sd = np.sqrt(np.diag(cov)) if np.all(np.linalg.eigvalsh(hess) > 0) else None
    except np.linalg.LinAlgError:
        sd = None
    if sd is None or not np.all(np.isfinite(sd)):
        sd = np.full(d, 1e-2)
    return mode, f0, sd


def _mass_box(box, y, l, r, eps, fam, mech, nodes, tail=1e-9, core=1e-3, rounds=3):
    """Where the posterior has its mass: returns (box, cores).

    box: per axis, the marginal [tail, 1 - tail] quantiles of a 41-point grid posterior
    plus two cells each side (the dropped mass is below 2 d ``tail``), repeated while an
    axis shrinks to less than half its width.  cores: per axis, the [core, 1 - core]
    quantiles plus two cells, where :func:`exact_posterior` puts most of its nodes.

    The region {log post > max - 25} of :func:`_auto_box` can be far wider than the
    posterior's bulk (a long ridge of low density, e.g. towards large scales when the
    releases say little about them, under a prior with a heavy tail there), and a
    uniform grid spread over it would put few nodes where the mass is, or none: a peak
    narrower than the grid's spacing would be missed and the ridge taken for the
    posterior.  So the 41 nodes of each axis are u = m + s sinh(v), v uniform, centred at
    the posterior mode m (found from the family's guess and the box's centre) with s its
    Laplace sd: dense at the peak, geometric along a ridge, with trapezoid weights in v.
    """
    pos = list(fam.positive)
    lo = np.array([math.log(a) if p else a for (a, _), p in zip(box, pos)])
    hi = np.array([math.log(b) if p else b for (_, b), p in zip(box, pos)])
    guess = np.array(fam.check_theta(*fam.guess(y, l, r, eps, mech)), float)
    guess = np.array([math.log(g) if p else g for g, p in zip(guess, pos)])
    starts = [np.clip(guess, lo, hi), 0.5 * (lo + hi)]
    best = max(starts, key=lambda u: _log_post_u(u, y, l, r, eps, fam, mech, nodes))
    mode, _, sd = _mode_scale(best, y, l, r, eps, fam, mech, nodes)
    n = 41
    for _ in range(rounds):
        m = np.clip(mode, lo, hi)
        us, ws = [], []
        for a, b, c, s in zip(lo, hi, m, sd):
            v = np.linspace(math.asinh((a - c) / s), math.asinh((b - c) / s), n)
            u = c + s * np.sinh(v)
            u[0], u[-1] = a, b
            us.append(u)
            ws.append(s * np.cosh(v) * _trapezoid(v))
        axes = [np.exp(u) if p else u for u, p in zip(us, pos)]
        lp = _log_post_grid(axes, y, l, r, eps, fam, mech, nodes)
        lp = lp + sum(np.expand_dims(u, [k for k in range(len(us)) if k != j])
                      for j, (u, p) in enumerate(zip(us, pos)) if p)  # density in u
        if not np.any(np.isfinite(lp)):
            break
        dens = np.exp(lp - np.max(lp))
        for j, w in enumerate(ws):
            dens = dens * np.expand_dims(w, [k for k in range(len(ws)) if k != j])
        shrunk = False
        for j in range(len(us)):
            i0, i1 = _mass_cells(dens, j, tail)
            if (us[j][i1] - us[j][i0]) < 0.5 * (hi[j] - lo[j]):
                lo[j], hi[j] = us[j][i0], us[j][i1]
                shrunk = True
        if not shrunk:
            break
    cores = []
    for j in range(len(us)):
        i0, i1 = _mass_cells(dens, j, core)
        cores.append((us[j][i0], us[j][i1]))
    box = [(math.exp(a), math.exp(b)) if p else (a, b) for a, b, p in zip(lo, hi, pos)]
    return box, cores


def _mass_cells(dens, j, level):
    """Node indices (i0, i1) along axis j of the gridded masses ``dens`` (density times
    the nodes' weights): the marginal's [level, 1 - level] quantile cells widened by two
    cells each side."""
    n = dens.shape[j]
    m = np.moveaxis(dens, j, 0).reshape(n, -1).sum(axis=1)
    c = np.cumsum(m) / m.sum()
    return (max(int(np.searchsorted(c, level)) - 2, 0),
            min(int(np.searchsorted(c, 1 - level)) + 2, n - 1))


def _axis_nodes(lo, hi, core, n):
    """Nodes on [lo, hi] (coordinate u) and the factor du/dv of their trapezoid weights.

    Uniform (du/dv None: trapezoid in u) unless a core interval is given and is under a
    fifth of the box: then
    u = m + s sinh(v) with v uniform, m the core's centre and s a quarter of its
    half-width, which puts about a third of the nodes in the core and keeps the
    trapezoid rule's fast convergence (a smooth change of variable).
    """
    if core is None:
        return np.linspace(lo, hi, n), None
    c0, c1 = max(core[0], lo), min(core[1], hi)
    if not (c1 > c0 and c1 - c0 < 0.2 * (hi - lo)):
        return np.linspace(lo, hi, n), None
    m, sc = 0.5 * (c0 + c1), 0.125 * (c1 - c0)
    v = np.linspace(math.asinh((lo - m) / sc), math.asinh((hi - m) / sc), n)
    u = m + sc * np.sinh(v)
    u[0], u[-1] = lo, hi
    return u, sc * np.cosh(v) * (v[1] - v[0])


def _trapezoid(x):
    w = np.empty_like(x)
    h = np.diff(x)
    w[0], w[-1] = 0.5 * h[0], 0.5 * h[-1]
    w[1:-1] = 0.5 * (h[:-1] + h[1:])
    return w


def _check_grid(grid, d):
    if grid is None:
        grid = (201,) if d == 1 else (101,) * d
    if np.ndim(grid) == 0:
        grid = (grid,) * d
    try:
        grid = tuple(grid)
    except TypeError:
        raise ValueError(f"grid must be {d} node counts, got {grid!r}") from None
    if len(grid) != d:
        raise ValueError(f"grid must be {d} node counts, got {grid!r}")
    return tuple(check_count("grid size", g, 3) for g in grid)


def _check_bounds(bounds, fam):
    if fam.dim == 1 and np.ndim(bounds) == 1:
        bounds = (bounds,)
    try:
        pairs = [(float(a), float(b)) for a, b in bounds]
    except (TypeError, ValueError):
        raise ValueError("bounds must be one (lo, hi) pair per parameter") from None
    if len(pairs) != fam.dim:
        raise ValueError(f"bounds must be {fam.dim} (lo, hi) pairs, got {len(pairs)}")
    for name, pos, (a, b) in zip(fam.params, fam.positive, pairs):
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ValueError(f"bounds for {name} need finite lo < hi, got ({a}, {b})")
        if pos and a <= 0:
            raise ValueError(f"bounds for {name} must be > 0 (a positive parameter)")
    return pairs


def _check_theta_grid(theta_grid, fam):
    try:
        axes = [np.asarray(a, dtype=float) for a in theta_grid]
    except (TypeError, ValueError):
        raise ValueError("theta_grid must be one 1-d array of nodes per parameter") from None
    if len(axes) != fam.dim:
        raise ValueError(f"theta_grid must have {fam.dim} axes, got {len(axes)}")
    for name, pos, x in zip(fam.params, fam.positive, axes):
        if x.ndim != 1 or x.size < 3 or not np.all(np.isfinite(x)) or np.any(np.diff(x) <= 0):
            raise ValueError(f"theta_grid for {name} must be >= 3 finite increasing nodes")
        if pos and x[0] <= 0:
            raise ValueError(f"theta_grid for {name} must be > 0 (a positive parameter)")
    return axes


def exact_posterior_quadrature(y, l, r, eps, family=None, mechanism="laplace", grid=None,
                               bounds=None, theta_grid=None):
    """Posterior (5) of theta given released data, x_{1:n} integrated out, on a grid.

    p(theta | y_{1:n}) is proportional to eta(theta) prod_t p_{l_t,r_t}^eps(y_t | theta)
    (eq. 5 with each latent x_t integrated out; :func:`log_density` for the factors,
    ``family.log_prior`` for eta).  Families with one or two parameters.

    ``grid``: nodes per parameter (default 201 for one parameter, (101, 101) for two);
    ``bounds``: one (lo, hi) pair per parameter, else found automatically (module
    docstring; where the central [1e-3, 1 - 1e-3] mass of a marginal is narrow compared
    with the box, nodes crowd there by a sinh change of variable, see
    :func:`_axis_nodes`).  Nodes are uniform in theta_j (or log theta_j for a
    positive parameter) with given bounds; integrals are trapezoid sums in that
    coordinate.  ``theta_grid``: the
    nodes themselves instead (one increasing array per parameter; trapezoid in theta).
    """
    fam, mech = setup(family, mechanism)
    eps = check_eps(eps)
    y, l, r = check_observations(y, l, r)
    if fam.dim not in (1, 2):
        raise ValueError(f"exact_posterior grids one or two parameters; {fam.name} has {fam.dim}")
    if theta_grid is not None:
        if grid is not None or bounds is not None:
            raise ValueError("give theta_grid, or grid and bounds, not both")
        axes = _check_theta_grid(theta_grid, fam)
        weights = [_trapezoid(x) for x in axes]
        log_axes = (False,) * fam.dim
    else:
        sizes = _check_grid(grid, fam.dim)
        if bounds is None:
            box = _auto_box(y, l, r, eps, fam, mech, _SCAN_NODES)
            box, cores = _mass_box(box, y, l, r, eps, fam, mech, _SCAN_NODES)
        else:
            box, cores = _check_bounds(bounds, fam), None
        axes, weights = [], []
        for j, ((a, b), n, pos) in enumerate(zip(box, sizes, fam.positive)):
            ua, ub = (math.log(a), math.log(b)) if pos else (a, b)
            u, dudv = _axis_nodes(ua, ub, None if cores is None else cores[j], n)
            # trapezoid in u (uniform nodes) or in v with du = (du/dv) dv (sinh nodes)
            wu = _trapezoid(u) if dudv is None else dudv * _trapezoid(np.arange(n, dtype=float))
            if pos:  # u = log theta: weight du theta
                x = np.exp(u)
                x[0], x[-1] = a, b
                w = wu * x
            else:
                x = u
                w = wu
            axes.append(x)
            weights.append(w)
        log_axes = tuple(bool(p) for p in fam.positive)
    lp = _log_post_grid(axes, y, l, r, eps, fam, mech, POSTERIOR_NODES)
    logw = np.log(weights[0])
    for w in weights[1:]:
        logw = np.add.outer(logw, np.log(w))
    log_z = float(special.logsumexp(lp + logw))
    # edge: in the measure d log theta for positive parameters, as the box search
    lpu = lp + sum(np.expand_dims(np.log(x), [k for k in range(lp.ndim) if k != j])
                   for j, (x, p) in enumerate(zip(axes, fam.positive)) if p)
    edge = max(float(np.max(np.moveaxis(lpu, j, 0)[[0, -1]])) for j in range(lp.ndim))
    edge -= float(np.max(lpu))
    return GridPosterior(params=tuple(fam.params), axes=axes, log_post=lp - log_z,
                         log_evidence=log_z, edge=edge, weights=weights, log_axes=log_axes)


def logistic_release_quad(fam, y, l, r, eps, m, c, mech):
    """log p(y | m, c) and the score of one release (eq. 7) by scipy.integrate.quad in x,
    breakpoints at T_l^r(y) and at the integrand's maximum on a 4e5-point grid (the
    logistic's log cdf and log sf in closed form)."""
    from scipy import integrate

    b = (r - l) / eps
    if mech == "laplace":
        def noise(v):
            return -np.abs(v) / b - math.log(2 * b)

        def d_noise(v):
            return np.sign(v) / b
    else:
        def noise(v):
            return -0.5 * (v / b) ** 2 - math.log(b * math.sqrt(2 * math.pi))

        def d_noise(v):
            return v / b**2

    def logf(x):
        return fam.base_logpdf((x - m) / c) - math.log(c) + noise(y - x)

    xs = np.linspace(l, r, 400001)
    v = logf(xs)
    atoms = (-np.logaddexp(0.0, -(l - m) / c) + noise(y - l),
             -np.logaddexp(0.0, (r - m) / c) + noise(y - r))
    top = max(float(np.max(v)), *atoms)
    k = int(np.argmax(v))
    pts = sorted({p for p in (min(max(y, l), r), xs[k], xs[max(k - 2, 0)],
                              xs[min(k + 2, xs.size - 1)]) if l < p < r})
    ints = [integrate.quad(lambda x, w=w: math.exp(logf(x) - top) * w(x), l, r, points=pts,
                           limit=2000, epsabs=0, epsrel=1e-13)[0]
            for w in (lambda x: 1.0, lambda x: d_noise(y - x),
                      lambda x: (x - m) / c * d_noise(y - x))]
    tot = ints[0] + sum(math.exp(a - top) for a in atoms)
    return top + math.log(tot), np.array(ints[1:]) / tot
