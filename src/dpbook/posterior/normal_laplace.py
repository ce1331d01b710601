"""The exact posterior (5) of the normal/Laplace model on a grid: the compiled backend of
:func:`dpbook.posterior.exact_posterior` for the paper's model (:mod:`dpbook.backends`).

p(theta | y_{1:n}) is proportional to eta(theta) prod_t p(y_t | theta), each factor the
closed-form density of one release (:mod:`dpbook.likelihood.normal_laplace`, x_t
integrated out exactly), eta the prior of Section 6 (:mod:`dpbook.model.prior`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from dpbook.likelihood.normal_laplace import loglik_grid, logp_and_score
from dpbook.model.prior import SECTION6, LocationScalePrior
from dpbook.posterior.grid import GridPosterior
from dpbook.posterior.quantiles import node_quantiles
from dpbook.validation import check_count, check_eps, check_observations


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


def _log_post_grid(y, l, r, eps, mu_grid, sigma_grid, prior):
    """Unnormalised log posterior (5), x integrated out, on the grid (mu_i, sigma_j)."""
    return (loglik_grid(y, l, r, eps, mu_grid, sigma_grid)
            + log_prior(mu_grid[:, None], sigma_grid[None, :], prior))


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
class ExactPosterior(GridPosterior):
    """Posterior (5) of theta = (mu, sigma) on a grid (see :func:`exact_posterior`).

    ``log_density[i, j]`` is log p(mu_i, sigma_j | y), normalised with respect to
    d mu d sigma by the quadrature weights ``w_mu`` and ``w_sigma``:
    sum_ij exp(log_density) w_mu[i] w_sigma[j] = 1.  The grids need not be uniform.
    ``log_evidence`` is log p(y_{1:n}) (integral over the box); ``edge_density`` is the
    largest density on the boundary of the box relative to the largest overall, in
    the (mu, log sigma) measure: a check that the box holds the posterior.
    ``quad_error`` is the largest change of the posterior means and sd, in units of the
    posterior sd, when every other node is dropped (NaN for even grid sizes): a
    conservative estimate of the quadrature error.

    A :class:`GridPosterior` (axes = (mu_grid, sigma_grid), log_post = log_density,
    weights = (w_mu, w_sigma), edge = log edge_density) whose marginals and moments are
    computed in the closed-form backend's own (fixed) order of operations.
    """

    edge_density: float = math.nan
    quad_error: float = math.nan

    mu_grid = property(lambda self: self.axes[0])
    sigma_grid = property(lambda self: self.axes[1])
    log_density = property(lambda self: self.log_post)
    w_mu = property(lambda self: self.weights[0])
    w_sigma = property(lambda self: self.weights[1])

    def marginal(self, j):
        """(axis, marginal density) of parameter j (0 or 'mu', 1 or 'sigma')."""
        j = self._index(j)
        return self.axes[j], self.marginal_mu() if j == 0 else self.marginal_sigma()

    def marginal_mu(self):
        """Marginal posterior density of mu on ``mu_grid``."""
        return np.exp(self.log_density) @ self.w_sigma

    def marginal_sigma(self):
        """Marginal posterior density of sigma on ``sigma_grid``."""
        return self.w_mu @ np.exp(self.log_density)

    def mean(self):
        """Posterior means, array (E[mu], E[sigma])."""
        return np.array([np.sum(self.w_mu * self.marginal_mu() * self.mu_grid),
                         np.sum(self.w_sigma * self.marginal_sigma() * self.sigma_grid)])

    def sd(self):
        """Posterior standard deviations, array (sd[mu], sd[sigma])."""
        m = self.mean()
        v_mu = np.sum(self.w_mu * self.marginal_mu() * (self.mu_grid - m[0]) ** 2)
        v_sig = np.sum(self.w_sigma * self.marginal_sigma() * (self.sigma_grid - m[1]) ** 2)
        return np.sqrt(np.array([v_mu, v_sig]))

    def quantile(self, q):
        """Marginal posterior quantiles of (mu, sigma): shape (2,) or (len(q), 2).

        Robust summaries: unlike sd(sigma) (see :func:`exact_posterior`) they do not
        depend on how far the box reaches into the tails.  The nodes are uniform in
        the grid's own coordinate t (``_axis``: x = centre + scale sinh(t)), not in mu
        or sigma, so the marginal mass per unit of t is interpolated by a cubic spline,
        its antiderivative inverted by root finding, and t mapped back to the parameter
        by monotone interpolation of the nodes.  (A spline in sigma itself oscillates
        across the geometric tail nodes: on a 41 x 41 grid it put the median of sigma
        at 1e12.)
        """
        q = np.asarray(q, dtype=float)
        if not np.all((q >= 0) & (q <= 1)):
            raise ValueError("quantile levels must lie in [0, 1]")
        return np.stack([node_quantiles(self.mu_grid, self.marginal_mu(), self.w_mu, q),
                         node_quantiles(self.sigma_grid, self.marginal_sigma(),
                                         self.w_sigma, q)], axis=-1)

    def summary(self):
        """{"mu": {"mean", "sd"}, "sigma": {"mean", "sd"}} as plain floats."""
        m, s = self.mean(), self.sd()
        return {"mu": {"mean": float(m[0]), "sd": float(s[0])},
                "sigma": {"mean": float(m[1]), "sd": float(s[1])}}


# automatic box, in the coordinates (mu, v = log sigma), where the posterior density
# (w.r.t. d mu dv) is lpv(mu, v) = log eta(mu, e^v) + sum_t log p(y_t | mu, e^v) + v.
_SCAN_GRID = 32  # coarse scan of the initial box, for starting points
_PATTERN_GRID = 11  # pattern search grids, then Newton
_MAX_PATTERN = 100
_START_SD = 6.0  # box starts at the mode +- 6 Laplace sd ...
_TAIL_DROP = 40.0  # ... and a side is pushed out (x2) while within 40 of the maximum
_MAX_PUSH = 60
_EDGE_LINE = 32  # points along each side of the box for that test
_SINH_SD = 2.0  # sinh map scale of the final grid, in Laplace sd


def _lpv_and_grad(theta, y, l, r, eps, prior):
    """lpv and its gradient at theta = (mu, v): score (Fisher's identity) plus prior."""
    mu, v = float(theta[0]), float(theta[1])
    sigma = math.exp(v)
    lp, s = logp_and_score(y, l, r, eps, mu, sigma)
    val = float(np.sum(lp) + log_prior(mu, sigma, prior)) + v
    d_mu = float(np.sum(s[:, 0])) - (mu - prior.loc_mean) / prior.loc_var
    d_sig = (float(np.sum(s[:, 1])) - 2.0 * (prior.scale2_shape + 1.0) / sigma
             + 2.0 * prior.scale2_scale / sigma**3 + 1.0 / sigma)
    return val, np.array([d_mu, sigma * d_sig + 1.0])


def _initial_box(y, l, r, eps, prior):
    lo_data = min(l.min(), y.min())
    hi_data = max(r.max(), y.max())
    m0, psd = prior.loc_mean, math.sqrt(prior.loc_var)
    b_min = float(np.min((r - l) / eps))
    return np.array([min(m0 - 10 * psd, lo_data), max(m0 + 10 * psd, hi_data),
                     math.log(1e-3 * min(1.0, b_min)),
                     math.log(max(1e3, 10 * (hi_data - lo_data)))])


def _hessian(fun_grad, theta, h):
    """Symmetrised central-difference Hessian from an exact gradient."""
    hess = np.empty((2, 2))
    for k in range(2):
        e = np.zeros(2)
        e[k] = h[k]
        hess[:, k] = (fun_grad(theta + e)[1] - fun_grad(theta - e)[1]) / (2 * h[k])
    return 0.5 * (hess + hess.T)


def _neg_definite(hess):
    return bool(np.all(np.isfinite(hess)) and np.all(np.linalg.eigvalsh(hess) < 0))


def _maximise(fun_grad, theta, scale, lo, hi, max_iter=50):
    """Maximise a smooth function of two variables inside the box [lo, hi].

    Newton steps with the Hessian from central differences of the exact gradient
    where it is negative definite, otherwise a gradient step of one ``scale`` unit;
    Armijo backtracking; stops when the predicted gain g.d/2 is below 1e-10.
    (Plain NumPy: scipy's L-BFGS-B calls a threaded BLAS that is very slow on a busy
    machine for a problem this small.)  Returns (theta, value, scale), scale being the
    Laplace sd when the final Hessian is negative definite.
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


def _find_mode(y, l, r, eps, prior):
    """Posterior mode in (mu, v), its log density and the Laplace sd of mu and v.

    A 32 x 32 scan of the initial box (+-10 prior sd of mu and all data; sigma from
    1e-3 min(1, b) to max(1e3, 10 x data range), b = (r - l)/eps), then a pattern
    search on 11 x 11 grids around the best point (moved while the best point is on
    the boundary, shrunk to +-2 spacings otherwise) until neighbouring grid values
    differ by less than 1 (spacing ~ posterior sd), then Newton steps with the exact
    gradient (score + prior).
    """
    box = _initial_box(y, l, r, eps, prior)
    mus = np.linspace(box[0], box[1], _SCAN_GRID)
    vs = np.linspace(box[2], box[3], _SCAN_GRID)
    lpv = _log_post_grid(y, l, r, eps, mus, np.exp(vs), prior) + vs[None, :]
    i, j = np.unravel_index(np.argmax(lpv), lpv.shape)
    centre = np.array([mus[i], vs[j]])
    half = 2.0 * np.array([mus[1] - mus[0], vs[1] - vs[0]])
    g = _PATTERN_GRID
    for _ in range(_MAX_PATTERN):
        mus = np.linspace(centre[0] - half[0], centre[0] + half[0], g)
        vs = np.linspace(centre[1] - half[1], centre[1] + half[1], g)
        lpv = _log_post_grid(y, l, r, eps, mus, np.exp(vs), prior) + vs[None, :]
        i, j = np.unravel_index(np.argmax(lpv), lpv.shape)
        centre = np.array([mus[i], vs[j]])
        if i in (0, g - 1) or j in (0, g - 1):
            continue
        near = lpv[i - 1:i + 2, j - 1:j + 2]
        if np.max(near) - np.min(near) < 1.0:
            break
        half = 2.0 * half / (g - 1) * 2.0

    def fun_grad(theta):
        return _lpv_and_grad(theta, y, l, r, eps, prior)

    return _maximise(fun_grad, centre, half / (g - 1), box[0::2], box[1::2])


def _auto_box(y, l, r, eps, prior):
    """Box (mu_lo, mu_hi, v_lo, v_hi) and the mode and scales for the sinh grids.

    From the mode +- 6 Laplace sd, every side whose boundary line (32 points of the
    sinh grid along it) has a log density within 40 of the maximum is pushed out to
    twice its distance from the mode, until none is.  For a Gaussian shape this stops at
    +-12 sd (mass outside < e^-40); it follows heavy tails (clipping makes
    p(y | theta) tend to a constant as sigma -> inf, so the sigma tail is the prior's)
    as far as they go, which the sinh grids can afford.
    """
    mode, top, sd = _find_mode(y, l, r, eps, prior)
    dist = _START_SD * np.repeat(sd, 2)  # distances of the 4 sides from the mode
    sign = np.array([-1.0, 1.0, -1.0, 1.0])
    centre = np.repeat(mode, 2)
    for _ in range(_MAX_PUSH):
        box = centre + sign * dist
        mus, _ = _axis(box[0], box[1], _EDGE_LINE, mode[0], _SINH_SD * sd[0])
        vs, _ = _axis(box[2], box[3], _EDGE_LINE, mode[1], _SINH_SD * sd[1])
        sides = (
            _log_post_grid(y, l, r, eps, box[:2], np.exp(vs), prior) + vs[None, :],
            _log_post_grid(y, l, r, eps, mus, np.exp(box[2:]), prior) + box[None, 2:],
        )
        side_max = np.array([sides[0][0].max(), sides[0][1].max(),
                             sides[1][:, 0].max(), sides[1][:, 1].max()])
        top = max(top, side_max.max())
        push = side_max > top - _TAIL_DROP
        if not push.any():
            break
        dist = np.where(push, 2.0 * dist, dist)
    return centre + sign * dist, mode, sd



def _check_bounds(bounds):
    try:
        (m0, m1), (s0, s1) = bounds
        m0, m1, s0, s1 = (float(v) for v in (m0, m1, s0, s1))
    except (TypeError, ValueError):
        raise ValueError("bounds must be ((mu_lo, mu_hi), (sigma_lo, sigma_hi))") from None
    if not all(math.isfinite(v) for v in (m0, m1, s0, s1)) or not (m0 < m1 and 0 < s0 < s1):
        raise ValueError("bounds need finite mu_lo < mu_hi and 0 < sigma_lo < sigma_hi")
    return np.array([m0, m1, math.log(s0), math.log(s1)])


def exact_posterior_normal_laplace(y, l, r, eps, grid=(101, 101), bounds=None, tol=1e-5,
                                   prior=SECTION6):
    """Posterior (5) of theta = (mu, sigma) given released data, by brute force on a grid.

    Eq. (5) with the latent x_t integrated out exactly:
    p(theta | y_{1:n}) proportional to eta(theta) prod_t p_{l_t,r_t}^eps(y_t | theta), with
    the Section 6 prior (:func:`log_prior`; another through ``prior``, a
    :class:`~dpbook.model.prior.LocationScalePrior`) and the closed-form density of
    :func:`log_density` (evaluated by a compiled, parallel kernel; memory is O(grid)
    whatever n, so no chunking is needed).

    ``grid = (n_mu, n_sigma)`` nodes; integrals are trapezoid sums.  With
    ``bounds = ((mu_lo, mu_hi), (sigma_lo, sigma_hi))`` the grid is uniform in mu and in
    log sigma over that box.  With ``bounds=None`` (see ``_auto_box``) the posterior
    mode and Laplace sd are found first (scan, pattern search and Newton steps with the
    exact score), the box grows from +-6 sd until its boundary is 40 below the maximum
    log density (+-12 sd for a Gaussian shape), and the grids are
    mu = m + 2 sd_mu sinh(t) and log sigma = v + 2 sd_v sinh(t') with t, t' uniform:
    dense at the mode, geometric in the tails.  The trapezoid rule in t converges
    faster than any power of the spacing for a smooth density that is negligible at
    the box edges; 101 nodes put ~8 nodes per sd at the mode for a Gaussian-shaped
    posterior.  The grid is then refined (n -> 2n - 1 nodes, nested) while the
    estimated quadrature error ``quad_error`` (see :class:`ExactPosterior`) exceeds
    ``tol`` posterior sd, within a budget of 1.2e7 grid points x observations.

    Note: with clipping, p(y | theta) tends to a positive constant as sigma -> inf,
    and the prior tail of sigma is ~sigma^-3, so the exact posterior of sigma has an
    infinite variance for every n; the moments reported are those of the posterior
    restricted to the box, whose edge is where the density has dropped by e^-40 (for n
    in the hundreds the excluded part is astronomically small).
    """
    y, l, r = check_observations(y, l, r)
    eps = check_eps(eps)
    try:
        n_mu, n_sig = grid
    except (TypeError, ValueError):
        raise ValueError("grid must be a pair (n_mu, n_sigma)") from None
    n_mu = check_count("grid n_mu", n_mu, 3)
    n_sig = check_count("grid n_sigma", n_sig, 3)
    if not isinstance(prior, LocationScalePrior):
        raise ValueError(f"prior must be a LocationScalePrior, got {prior!r}")
    if bounds is None:
        box, mode, sd = _auto_box(y, l, r, eps, prior)
        maps = ((mode[0], _SINH_SD * sd[0]), (mode[1], _SINH_SD * sd[1]))
    else:
        box = _check_bounds(bounds)
        maps = ((None, None), (None, None))
    while True:
        post = _grid_posterior(y, l, r, eps, box, maps, n_mu, n_sig, prior)
        if (bounds is not None or not post.quad_error > tol
                or (2 * n_mu - 1) * (2 * n_sig - 1) * y.size > _REFINE_BUDGET):
            return post
        n_mu, n_sig = 2 * n_mu - 1, 2 * n_sig - 1


_REFINE_BUDGET = 1.2e7  # largest grid size x n for the automatic refinement


def _moments(lp, w_mu, w_sig, mus, sig):
    p = np.exp(lp - np.max(lp)) * w_mu[:, None] * w_sig[None, :]
    p /= p.sum()
    pm, ps = p.sum(axis=1), p.sum(axis=0)
    mean = np.array([pm @ mus, ps @ sig])
    sd = np.sqrt(np.array([pm @ (mus - mean[0]) ** 2, ps @ (sig - mean[1]) ** 2]))
    return mean, sd


def _grid_posterior(y, l, r, eps, box, maps, n_mu, n_sig, prior):
    mus, w_mu = _axis(box[0], box[1], n_mu, *maps[0])
    vs, w_v = _axis(box[2], box[3], n_sig, *maps[1])
    sig = np.exp(vs)
    w_sig = w_v * sig
    lp = _log_post_grid(y, l, r, eps, mus, sig, prior)
    lpv = lp + vs[None, :]  # density w.r.t. d mu d log sigma
    edge = max(lpv[0].max(), lpv[-1].max(), lpv[:, 0].max(), lpv[:, -1].max())
    log_z = float(special.logsumexp(lp + np.log(w_mu)[:, None] + np.log(w_sig)[None, :]))
    quad_error = math.nan
    if n_mu % 2 and n_sig % 2 and n_mu > 3 and n_sig > 3:
        m1, s1 = _moments(lp, w_mu, w_sig, mus, sig)
        m2, s2 = _moments(lp[::2, ::2], 2 * w_mu[::2], 2 * w_sig[::2], mus[::2], sig[::2])
        quad_error = float(np.max(np.abs(np.concatenate([m2 - m1, s2 - s1])) / np.tile(s1, 2)))
    edge_rel = edge - np.max(lpv)
    return ExactPosterior(params=("mu", "sigma"), axes=[mus, sig], log_post=lp - log_z,
                          log_evidence=log_z, edge=float(edge_rel), weights=[w_mu, w_sig],
                          edge_density=float(np.exp(edge_rel)), quad_error=quad_error)
