"""The exact posterior (5) on a grid, for every family and mechanism: one pipeline.

p(theta | y_{1:n}) is proportional to eta(theta) prod_t p(y_t | theta), each factor the
density of one release with x_t integrated out (eq. 5; the p of eq. 7).  The pipeline
(mode search, box, sinh axes, quadrature error and refinement) is written once, in the
coordinates u_j = theta_j, or log theta_j for a positive parameter; a *model* supplies
what differs between families, the log-likelihood on a grid:

* :class:`PaperModel`, the normal family with the Laplace mechanism (Section 6): the
  closed-form density (:mod:`dpbook.likelihood.normal_laplace`) and its exact score,
  the paper model's own primitives (as a ``scipy.stats`` distribution overrides a
  generic method with a closed form);
* :class:`GridModel`, any other family: the log-likelihood grid compiled for a
  location-scale family (:mod:`dpbook.likelihood.compiled_quadrature`), or the numpy quadrature of
  :mod:`dpbook.likelihood.quadrature` for a family that does not compile; the gradient
  for the mode search by central differences.

:mod:`dpbook.backends` chooses the model (``backend("posterior", ...)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from dpbook.likelihood.compiled_quadrature import compiled_setup
from dpbook.likelihood.normal_laplace import loglik_grid, logp_and_score
from dpbook.model.mechanisms import get_mechanism
from dpbook.model.prior import SECTION6, LocationScalePrior
from dpbook.posterior.grid_density import NodeGridPosterior
from dpbook.validation import check_count, check_memory


def log_prior(mu, sigma, prior=SECTION6):
    """log eta(mu, sigma) of Section 6: mu ~ N(0, 10^4), sigma^2 ~ IG(1, 1), independent
    (other hyperparameters: ``prior``, a :class:`~dpbook.model.prior.LocationScalePrior`).

    The density of sigma follows from that of sigma^2 by the change of variables
    p(sigma) = 2 sigma IG(sigma^2; 1, 1) = 2 sigma^-3 exp(-1/sigma^2).
    """
    mu = np.asarray(mu, dtype=float)
    sigma = np.asarray(sigma, dtype=float)
    m0, var, a, b = prior.loc_mean, prior.loc_var, prior.scale2_shape, prior.scale2_scale
    lp_mu = -0.5 * (mu - m0) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
    s2 = sigma * sigma
    lp_s2 = a * math.log(b) - math.lgamma(a) - (a + 1.0) * np.log(s2) - b / s2
    return lp_mu + lp_s2 + math.log(2.0) + np.log(sigma)


# ------------------------------------------------------------------ the models
class GridModel:
    """eta(theta) prod_t p(y_t | theta) of eq. (5) on grids, for the pipeline.

    ``loglik(axes)``: sum_t log p(y_t | theta) on the product grid of ``axes`` (one
    array of theta_j per parameter): the only part that differs between families.
    """

    def __init__(self, family, mechanism, y, l, r, eps, loglik):
        self.family, self.mechanism = family, mechanism
        self.y, self.l, self.r, self.eps = y, l, r, eps
        self.params, self.positive = tuple(family.params), tuple(family.positive)
        self.loglik = loglik

    def log_post(self, axes):
        """Unnormalised log posterior (5) on the product grid of ``axes``."""
        mesh = np.meshgrid(*axes, indexing="ij")
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            lp = self.loglik(axes) + np.asarray(self.family.log_prior(*mesh), float)
        return np.where(np.isnan(lp), -np.inf, lp)

    def value_grad(self, u):
        """(lpu, its gradient) at u, the gradient by central differences."""
        d = u.size
        h = 1e-5 * np.maximum(1.0, np.abs(u))
        stencil = _lpu(self, [np.array([v - s, v, v + s]) for v, s in zip(u, h)])
        mid = stencil[(1,) * d]
        grad = np.array([(np.take(stencil, 2, j)[(1,) * (d - 1)]
                          - np.take(stencil, 0, j)[(1,) * (d - 1)]) / (2 * h[j])
                         for j in range(d)])
        if not np.isfinite(mid):
            return -math.inf, np.zeros(d)
        return float(mid), np.where(np.isfinite(grad), grad, 0.0)

    def initial_box(self):
        """[lo_0, hi_0, lo_1, ...] in u: all data and +-10 prior sd of a location, scales
        1e-3 min(1, b) to max(1e3, 10 x range); else the guess +-10 ranges (or x e^+-9)."""
        y, l, r, eps = self.y, self.l, self.r, self.eps
        lo_data = min(l.min(), y.min())
        hi_data = max(r.max(), y.max())
        prior = getattr(self, "prior", None) or getattr(self.family, "prior", None)
        if self.positive == (False, True) and isinstance(prior, LocationScalePrior):
            m0, psd = prior.loc_mean, math.sqrt(prior.loc_var)
            b_min = float(np.min((r - l) / eps))
            return np.array([min(m0 - 10 * psd, lo_data), max(m0 + 10 * psd, hi_data),
                             math.log(1e-3 * min(1.0, b_min)),
                             math.log(max(1e3, 10 * (hi_data - lo_data)))])
        guess = self.family.check_theta(*self.family.guess(y, l, r, eps, self.mechanism))
        span = 10.0 * (hi_data - lo_data + 1.0)
        out = []
        for g, p in zip(guess, self.positive):
            out += [math.log(g) - 9.0, math.log(g) + 9.0] if p else [g - span, g + span]
        return np.array(out)


POSTERIOR_NODES = 8  # x nodes a panel of the numpy quadrature (log p error ~1e-9)
_POST_LEVELS = np.array([1e-9, 1e-4, 0.01, 0.15, 0.5, 0.85, 0.99, 1 - 1e-4, 1 - 1e-9])


def numpy_model(family, mechanism, y, l, r, eps):
    """A :class:`GridModel` whose log-likelihood grid is the numpy quadrature of
    :mod:`dpbook.likelihood.quadrature` (any family; the one that does not compile)."""
    from dpbook.likelihood.quadrature import CHUNK, MAX_TERMS, NOISE_TOLS, core, theta_info

    def loglik(axes):
        mesh = np.meshgrid(*axes, indexing="ij")
        cols = [m.ravel() for m in mesh]
        per = y.size * (3 * POSTERIOR_NODES * (_POST_LEVELS.size + 2 * len(NOISE_TOLS) + 4)
                        if not family.discrete else
                        max(64.0, min(float(np.max(r - l, initial=0.0)), MAX_TERMS)))
        step = max(1, int(CHUNK // per))
        out = np.empty(cols[0].size)
        for i in range(0, out.size, step):
            th = [c[i:i + step, None] for c in cols]
            info = theta_info(family, th, _POST_LEVELS)
            lp, _ = core(y[None], l[None], r[None], eps, th, info, family, mechanism, False,
                         POSTERIOR_NODES)
            out[i:i + step] = np.sum(lp, axis=-1)
        return out.reshape(mesh[0].shape)

    return GridModel(family, mechanism, y, l, r, eps, loglik)


class PaperModel(GridModel):
    """The normal family with the Laplace mechanism (Section 6): the closed-form release
    density and its exact score (:mod:`dpbook.likelihood.normal_laplace`), the prior of
    :func:`log_prior` (``prior``: another :class:`LocationScalePrior`)."""

    params, positive = ("mu", "sigma"), (False, True)

    def __init__(self, y, l, r, eps, prior=SECTION6):
        if not isinstance(prior, LocationScalePrior):
            raise ValueError(f"prior must be a LocationScalePrior, got {prior!r}")
        self.y, self.l, self.r, self.eps, self.prior = y, l, r, eps, prior
        self.family = None

    def log_post(self, axes):
        mu, sigma = axes
        return (loglik_grid(self.y, self.l, self.r, self.eps, mu, sigma)
                + log_prior(mu[:, None], sigma[None, :], self.prior))

    def value_grad(self, theta):
        """lpv at theta = (mu, v = log sigma) and its exact gradient: the score
        (Fisher's identity) plus the prior's."""
        prior = self.prior
        mu, v = float(theta[0]), float(theta[1])
        sigma = math.exp(v)
        lp, s = logp_and_score(self.y, self.l, self.r, self.eps, mu, sigma)
        val = float(np.sum(lp) + log_prior(mu, sigma, prior)) + v
        d_mu = float(np.sum(s[:, 0])) - (mu - prior.loc_mean) / prior.loc_var
        d_sig = (float(np.sum(s[:, 1])) - 2.0 * (prior.scale2_shape + 1.0) / sigma
                 + 2.0 * prior.scale2_scale / sigma**3 + 1.0 / sigma)
        return val, np.array([d_mu, sigma * d_sig + 1.0])


# ------------------------------------------------------------------ the result
def _axis(lo, hi, n, center=None, scale=None):
    """Nodes and trapezoid weights on [lo, hi]: uniform, or x = center + scale sinh(t)
    with t uniform (dense near the centre, geometric in the tails)."""
    if scale is None:
        t = np.linspace(lo, hi, n)
        x, dx = t, np.ones(n)
    else:
        t = np.linspace(math.asinh((lo - center) / scale), math.asinh((hi - center) / scale), n)
        x, dx = center + scale * np.sinh(t), scale * np.cosh(t)
    w = (t[1] - t[0]) * dx
    w[0] *= 0.5
    w[-1] *= 0.5
    x[0], x[-1] = lo, hi
    return x, w


@dataclass(frozen=True)
class ExactPosterior(NodeGridPosterior):
    """Posterior (5) of theta on a grid (one or two parameters; see
    :func:`exact_posterior`).

    ``log_post`` is the log density w.r.t. d theta, normalised by the quadrature
    ``weights``: sum exp(log_post) prod_j weights[j] = 1.  The grids need not be uniform.
    ``log_evidence`` is log p(y_{1:n}) (integral over the box); ``edge`` is the log of
    the largest density on the boundary of the box relative to the largest overall, in
    the measure d log theta_j for a positive parameter: a check that the box holds the
    posterior.  ``quad_error`` is the largest change of the posterior means and sd, in
    units of the posterior sd, when every other node is dropped (NaN for even grid
    sizes): a conservative estimate of the quadrature error.  Marginals and moments are
    computed in a fixed order of operations (the paper's numbers keep their bits).
    """

    edge_density: float = math.nan  # exp(edge)
    quad_error: float = math.nan

    def marginal(self, j):
        """(axis, marginal density) of parameter j (an index or a name)."""
        j = self._index(j)
        p = np.exp(self.log_post)
        if len(self.axes) == 1:
            return self.axes[j], p
        return self.axes[j], p @ self.weights[1] if j == 0 else self.weights[0] @ p


# ------------------------------------------------------------------ the pipeline
# automatic box, in the coordinates u (theta_j, or v = log theta_j for a positive
# parameter), where the posterior density w.r.t. du is lpu = log eta + sum_t log p + sum v
_SCAN_GRID = 32  # coarse scan of the initial box, for starting points
_PATTERN_GRID = 11  # pattern search grids, then Newton
_MAX_PATTERN = 100
_START_SD = 6.0  # box starts at the mode +- 6 Laplace sd ...
_TAIL_DROP = 40.0  # ... and a side is pushed out (x2) while within 40 of the maximum
_MAX_PUSH = 60
_EDGE_LINE = 32  # points along each side of the box for that test
_SINH_SD = 2.0  # sinh map scale of the final grid, in Laplace sd
_REFINE_BUDGET = 1.2e7  # largest grid size x n for the automatic refinement


def _hessian(fun_grad, theta, h):
    """Symmetrised central-difference Hessian from a gradient."""
    d = theta.size
    hess = np.empty((d, d))
    for k in range(d):
        e = np.zeros(d)
        e[k] = h[k]
        hess[:, k] = (fun_grad(theta + e)[1] - fun_grad(theta - e)[1]) / (2 * h[k])
    return 0.5 * (hess + hess.T)


def _neg_definite(hess):
    return bool(np.all(np.isfinite(hess)) and np.all(np.linalg.eigvalsh(hess) < 0))


def _maximise(fun_grad, theta, scale, lo, hi, max_iter=50):
    """Maximise a smooth function inside the box [lo, hi].

    Newton steps with the Hessian from central differences of the gradient where it is
    negative definite, otherwise a gradient step of one ``scale`` unit; Armijo
    backtracking; stops when the predicted gain g.d/2 is below 1e-10.  (Plain NumPy:
    scipy's L-BFGS-B calls a threaded BLAS that is very slow on a busy machine for a
    problem this small.)  Returns (theta, value, scale), scale being the Laplace sd
    when the final Hessian is negative definite.
    """
    f, g = fun_grad(theta)
    for _ in range(max_iter):
        hess = _hessian(fun_grad, theta, 1e-4 * scale)
        if _neg_definite(hess):
            d = -np.linalg.solve(hess, g)
            scale = np.sqrt(np.diag(np.linalg.inv(-hess)))
        else:
            d = scale * (scale * g) / max(np.linalg.norm(scale * g), 1e-300)
        gain = float(g @ d)
        if not gain > 2e-10:
            break
        t = 1.0
        while True:
            cand = np.clip(theta + t * d, lo, hi)
            fc, gc = fun_grad(cand)
            if fc >= f + 1e-4 * t * gain or t < 1e-12:
                break
            t *= 0.5
        if not fc > f:
            break
        theta, f, g = cand, fc, gc
    hess = _hessian(fun_grad, theta, 1e-3 * scale)
    if _neg_definite(hess):
        scale = np.sqrt(np.diag(np.linalg.inv(-hess)))
    return theta, f, scale


def _lpu(model, us):
    """The model's log posterior w.r.t. du on the product grid of ``us``."""
    lp = model.log_post([np.exp(u) if p else u for u, p in zip(us, model.positive)])
    for j, (u, p) in enumerate(zip(us, model.positive)):
        if p:
            lp = lp + np.expand_dims(u, [k for k in range(len(us)) if k != j])
    return lp


def _find_mode(model):
    """Posterior mode in u, its log density and the Laplace sd of each u_j.

    A 32-point scan per axis of the model's initial box, then a pattern search on grids
    of 11 points per axis around the best point (moved while the best point is on the
    boundary, shrunk to +-2 spacings otherwise) until neighbouring grid values differ by
    less than 1 (spacing ~ posterior sd), then Newton steps with the model's gradient.
    """
    box = model.initial_box()
    d = box.size // 2
    us = [np.linspace(box[2 * k], box[2 * k + 1], _SCAN_GRID) for k in range(d)]
    lpv = _lpu(model, us)
    idx = np.unravel_index(np.argmax(lpv), lpv.shape)
    centre = np.array([u[i] for u, i in zip(us, idx)])
    half = 2.0 * np.array([u[1] - u[0] for u in us])
    g = _PATTERN_GRID
    for _ in range(_MAX_PATTERN):
        us = [np.linspace(c - h, c + h, g) for c, h in zip(centre, half)]
        lpv = _lpu(model, us)
        idx = np.unravel_index(np.argmax(lpv), lpv.shape)
        centre = np.array([u[i] for u, i in zip(us, idx)])
        if any(i in (0, g - 1) for i in idx):
            continue
        near = lpv[tuple(slice(i - 1, i + 2) for i in idx)]
        if np.max(near) - np.min(near) < 1.0:
            break
        half = 2.0 * half / (g - 1) * 2.0
    return _maximise(model.value_grad, centre, half / (g - 1), box[0::2], box[1::2])


def _auto_box(model):
    """Box [lo_0, hi_0, lo_1, hi_1] in u and the mode and scales for the sinh grids.

    From the mode +- 6 Laplace sd, every side whose boundary (32 points of the sinh
    grid along it) has a log density within 40 of the maximum is pushed out to twice
    its distance from the mode, until none is.  For a Gaussian shape this stops at
    +-12 sd (mass outside < e^-40); it follows heavy tails (clipping makes
    p(y | theta) tend to a constant as a scale -> inf, so that tail is the prior's) as
    far as they go, which the sinh grids can afford.
    """
    mode, top, sd = _find_mode(model)
    d = mode.size
    dist = _START_SD * np.repeat(sd, 2)  # distances of the sides from the mode
    sign = np.tile([-1.0, 1.0], d)
    centre = np.repeat(mode, 2)
    for _ in range(_MAX_PUSH):
        box = centre + sign * dist
        lines = [_axis(box[2 * k], box[2 * k + 1], _EDGE_LINE, mode[k], _SINH_SD * sd[k])[0]
                 for k in range(d)]
        side_max = []
        for j in range(d):
            side = _lpu(model, [box[2 * j:2 * j + 2] if k == j else lines[k] for k in range(d)])
            side_max += [np.take(side, 0, j).max(), np.take(side, 1, j).max()]
        side_max = np.array(side_max)
        top = max(top, side_max.max())
        push = side_max > top - _TAIL_DROP
        if not push.any():
            break
        dist = np.where(push, 2.0 * dist, dist)
    return centre + sign * dist, mode, sd


def _moments(lp, weights, axes):
    p = np.exp(lp - np.max(lp))
    for j, w in enumerate(weights):
        p = p * np.expand_dims(w, [k for k in range(lp.ndim) if k != j])
    p /= p.sum()
    margs = [p.sum(axis=tuple(k for k in range(lp.ndim) if k != j)) for j in range(lp.ndim)]
    mean = np.array([m @ x for m, x in zip(margs, axes)])
    sd = np.sqrt(np.array([m @ (x - mean[j]) ** 2 for j, (m, x) in enumerate(zip(margs, axes))]))
    return mean, sd


def _grid_posterior(model, box, maps, sizes, ends=None):
    """``ends``: the user's bounds, which a positive parameter's axis (uniform in its
    log) ends at exactly, not at exp(log(bound)) (one ulp off)."""
    axes, weights, us = [], [], []
    for k, (n, p) in enumerate(zip(sizes, model.positive)):
        u, w = _axis(box[2 * k], box[2 * k + 1], n, *maps[k])
        us.append(u)
        axes.append(np.exp(u) if p else u)
        if p and ends is not None:
            axes[-1][[0, -1]] = ends[k]
        weights.append(w * axes[-1] if p else w)
    lp = model.log_post(axes)
    lpv = lp
    for j, (u, p) in enumerate(zip(us, model.positive)):
        if p:  # density w.r.t. d u
            lpv = lpv + np.expand_dims(u, [k for k in range(lp.ndim) if k != j])
    edge = max(max(np.take(lpv, 0, j).max(), np.take(lpv, -1, j).max()) for j in range(lp.ndim))
    lw = lp
    for j, w in enumerate(weights):
        lw = lw + np.expand_dims(np.log(w), [k for k in range(lp.ndim) if k != j])
    log_z = float(special.logsumexp(lw))
    quad_error = math.nan
    if all(n % 2 and n > 3 for n in sizes):
        m1, s1 = _moments(lp, weights, axes)
        half = tuple(slice(None, None, 2) for _ in sizes)
        m2, s2 = _moments(lp[half], [2 * w[::2] for w in weights], [x[::2] for x in axes])
        quad_error = float(np.max(np.abs(np.concatenate([m2 - m1, s2 - s1]))
                                  / np.tile(s1, 2)))
    edge_rel = edge - np.max(lpv)
    return ExactPosterior(params=tuple(model.params), axes=axes, log_post=lp - log_z,
                          log_evidence=log_z, edge=float(edge_rel), weights=weights,
                          log_axes=tuple(model.positive), edge_density=float(np.exp(edge_rel)),
                          quad_error=quad_error)


GRID_BYTES = 64  # per grid point: the mesh, its log-likelihood and density, the cdf


def check_grid(grid, params):
    """The grid's node counts per parameter (``grid``: one count, or one per parameter),
    checked: ValueError in one line for a bad count or a grid that cannot fit in memory."""
    d = len(params)
    if grid is None:
        grid = (101,) * d if d == 2 else (201,)
    if d == 1 and np.ndim(grid) == 0:
        grid = (grid,)
    try:
        sizes = tuple(grid)
    except TypeError:
        sizes = ()
    if len(sizes) != d:
        raise ValueError(f"grid must be {d} node counts (a pair (n_{params[0]}, "
                         f"n_{params[-1]}) for two parameters), got {grid!r}")
    sizes = tuple(check_count(f"grid n_{p}", n, 3) for p, n in zip(params, sizes))
    check_memory(f"a {' x '.join(map(str, sizes))} grid",
                 GRID_BYTES * float(np.prod(sizes, dtype=float)))
    return sizes


def _check_bounds(bounds, params, positive):
    if len(params) == 1 and np.ndim(bounds) == 1:
        bounds = (bounds,)
    try:
        pairs = [(float(a), float(b)) for a, b in bounds]
    except (TypeError, ValueError):
        raise ValueError("bounds must be one (lo, hi) pair per parameter") from None
    if len(pairs) != len(params):
        raise ValueError(f"bounds must be {len(params)} (lo, hi) pairs, got {len(pairs)}")
    out = []
    for name, pos, (a, b) in zip(params, positive, pairs):
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ValueError(f"bounds for {name} need finite lo < hi, got ({a}, {b})")
        if pos and a <= 0:
            raise ValueError(f"bounds for {name} must be > 0 (a positive parameter)")
        out += [math.log(a), math.log(b)] if pos else [a, b]
    return np.array(out)


def grid_posterior(model, grid=None, bounds=None, tol=1e-5):
    """The exact posterior (5) of a model on a grid (see :func:`exact_posterior`)."""
    sizes = check_grid(grid, model.params)
    if bounds is None:
        box, mode, sd = _auto_box(model)
        maps = tuple((m, _SINH_SD * s) for m, s in zip(mode, sd))
        ends = None
    else:
        box = _check_bounds(bounds, model.params, model.positive)
        maps = ((None, None),) * len(sizes)
        ends = [(float(a), float(b)) for a, b in
                ((bounds,) if len(sizes) == 1 and np.ndim(bounds) == 1 else bounds)]
    while True:
        post = _grid_posterior(model, box, maps, sizes, ends)
        if (bounds is not None or not post.quad_error > tol
                or np.prod([2 * n - 1 for n in sizes]) * model.y.size > _REFINE_BUDGET):
            return post
        sizes = tuple(2 * n - 1 for n in sizes)


def engine_model(family, mechanism):
    """For :mod:`dpbook.backends`: a function (y, l, r, eps) -> :class:`GridModel` whose
    log-likelihood grid is compiled, or None (the numpy quadrature runs; a family whose
    primitive does not compile is named in one warning)."""
    setup = compiled_setup(family, mechanism, "the exact posterior")
    if setup is None:
        return None

    def make(y, l, r, eps):
        rel = setup.releases(y, l, r, eps)

        def loglik(axes):
            mu, sigma = (np.asarray(a, dtype=float) for a in axes)
            theta = np.column_stack([np.repeat(mu, sigma.size), np.tile(sigma, mu.size)])
            return setup(rel, theta).reshape(mu.size, sigma.size)

        return GridModel(family, get_mechanism(mechanism), y, l, r, eps, loglik)

    return make
