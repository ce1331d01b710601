"""The posterior of theta = (mu, sigma) given a central release (chapter 11), on a grid.

The curator publishes y_1 = s_1 + Lap(b_1) and y_2 = s_2 + Lap(b_2), the centred sums
s_1 = sum z_i and s_2 = sum z_i^2 of z_i = T_l^r(x_i) - c (:mod:`dpbook.model.central_release`).
As Bernstein and Sheldon (2018, Section 3.2, "Normal approximation of p(s | theta)")
do, the sums are approximated by the central limit theorem,

    (s_1, s_2) ~ N(n m(theta), n S(theta)),   m = (E z, E z^2),
    S = [[E z^2 - (E z)^2, E z^3 - E z E z^2], [E z^3 - E z E z^2, E z^4 - (E z^2)^2]],

with the moments of the clipped normal in closed form (:func:`clipped_moments`: two
point masses at -h and h, h = (r - l)/2, and the normal between; clipping replaces
B&S's truncation, so n stays public and no random-sum CLT is needed).  The likelihood of
the release is this normal convolved with the two Laplace densities,

    p(y | theta) = int int N(s; n m, n S) Lap(y_1 - s_1; b_1) Lap(y_2 - s_2; b_2) ds,

which B&S sample by Gibbs with a scale-mixture augmentation of the Laplace; on a grid it
is computed directly (:func:`log_likelihood`): the Laplace in s_2 is split at its kink
into two exponentials, each times the normal in s_2 a truncated normal with a closed-form
mass; s_1 given s_2 is normal, and its convolution with Lap(b_1) is closed form (the
normal-Laplace density); what is left, the expectation of that density over each
truncated normal, is a Gauss-Legendre sum in the truncated normal's quantile (``nodes``
points: 32 by default, 16 in the posterior; the tests compare both with 128).

:func:`central_posterior` multiplies by the prior (Section 6's or another
:class:`~dpbook.model.prior.LocationScalePrior`) on a grid uniform in mu and log sigma,
zoomed until it holds the posterior, and returns a
:class:`~dpbook.posterior.GridPosterior`.  ``naive=True`` ignores the noise: y is taken
for s, the likelihood N(y; n m, n S) (the noise-naive baseline of B&S Section 4, here
with the clipping modelled so that only the noise is ignored).

Where the approximation breaks: at small n the sum of squares is skewed (a scaled
chi-square when nothing is clipped) and the normal misses its skew; the noise hides this
when b_2 is large against sd(s_2), and shows it when it is not (small n and large eps;
``tests/test_central_posterior.py`` and chapter 11 measure it by simulation).  With a
privately chosen interval the posterior treats [l, r] as fixed, although it was chosen
from the same people: the clipped sums are then not exactly those of n independent
draws clipped to a fixed interval (chapter 11 checks the calibration).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpbook.likelihood.quadrature import gauss_legendre
from dpbook.model.prior import SECTION6, LocationScalePrior
from dpbook.posterior.grid_density import NodeGridPosterior
from dpbook.validation import check_count

_LOG2PI = math.log(2 * math.pi)


def clipped_moments(mu, sigma, l, r):
    """E z^k, k = 1..4, of z = T_l^r(x) - c, x ~ N(mu, sigma^2), c = (l + r)/2 (arrays
    broadcast): (-h)^k P(x < l) + h^k P(x > r) + int_l^r (x - c)^k N(x; mu, sigma^2) dx.

    The integral is the binomial expansion of (m + sigma t)^k, m = mu - c, over the
    standard normal's partial moments J_j = int_alpha^beta t^j phi(t) dt, alpha = (l -
    mu)/sigma, beta = (r - mu)/sigma, by the recursion J_j = (j - 1) J_{j-2} +
    alpha^{j-1} phi(alpha) - beta^{j-1} phi(beta)."""
    mu, sigma = np.asarray(mu, float), np.asarray(sigma, float)
    h = 0.5 * (r - l)
    m = mu - 0.5 * (l + r)
    alpha, beta = (-h - m) / sigma, (h - m) / sigma
    pa, pb = special.ndtr(alpha), special.ndtr(-beta)  # P(x < l), P(x > r)
    fa, fb = np.exp(-0.5 * alpha**2) / math.sqrt(2 * math.pi), \
        np.exp(-0.5 * beta**2) / math.sqrt(2 * math.pi)
    inside = np.maximum(1.0 - pa - pb, 0.0)
    J = [inside, fa - fb]
    for j in range(2, 5):
        J.append((j - 1) * J[j - 2] + alpha ** (j - 1) * fa - beta ** (j - 1) * fb)
    out = []
    for k in range(1, 5):
        integral = sum(math.comb(k, j) * m ** (k - j) * sigma**j * J[j] for j in range(k + 1))
        out.append((-h) ** k * pa + h**k * pb + integral)
    return out


def sum_moments(mu, sigma, n, l, r):
    """Mean (m_1, m_2) and covariance (v_1, v_2, c_12) of the sums (s_1, s_2) of n
    clipped, centred values: n times the one-value moments (:func:`clipped_moments`).
    The variances are floored at 1e-12 n h^2 and 1e-12 n h^4 (all values clipped to one
    end: the sums are constants and only the noise is left)."""
    M1, M2, M3, M4 = clipped_moments(mu, sigma, l, r)
    h = 0.5 * (r - l)
    v1 = np.maximum(n * (M2 - M1 * M1), 1e-12 * n * h * h)
    v2 = np.maximum(n * (M4 - M2 * M2), 1e-12 * n * h**4)
    c12 = n * (M3 - M1 * M2)
    return n * M1, n * M2, v1, v2, c12


def _log_normal_laplace(y, a, w, b):
    """log int N(s; a, w) Lap(y - s; b) ds, the normal-Laplace convolution (arrays)."""
    sw = np.sqrt(w)
    lead = -math.log(2 * b) + 0.5 * w / b**2
    left = lead + (a - y) / b + special.log_ndtr((y - a - w / b) / sw)
    right = lead + (y - a) / b + special.log_ndtr((a - y - w / b) / sw)
    return np.logaddexp(left, right)


def log_likelihood(release, mu, sigma, naive=False, nodes=32):
    """log p(y_1, y_2 | mu, sigma) under the normal approximation of the sums convolved
    with the Laplace noise (module docstring); arrays mu, sigma broadcast.  ``naive``:
    log N(y; n m, n S), the noise ignored."""
    n, l, r = release.n, release.l, release.r
    y1, y2, b1, b2 = release.y1, release.y2, release.b1, release.b2
    m1, m2, v1, v2, c12 = sum_moments(mu, sigma, n, l, r)
    w = np.maximum(v1 - c12 * c12 / v2, 1e-12 * v1)  # var(s_1 | s_2)
    if naive:
        e2 = y2 - m2
        e1 = y1 - m1 - c12 / v2 * e2
        return (-_LOG2PI - 0.5 * np.log(v2) - 0.5 * np.log(w)
                - 0.5 * e2 * e2 / v2 - 0.5 * e1 * e1 / w)
    nodes = check_count("nodes", nodes, 2)
    u, wq = gauss_legendre(nodes)  # cached: the mode search calls this thousands of times
    log_u, wq = np.log(0.5 * (u + 1.0)), 0.5 * wq
    sv = np.sqrt(v2)
    lead = -math.log(2 * b2) + 0.5 * v2 / b2**2
    terms = []
    for side in (-1.0, 1.0):  # s_2 < y_2, then s_2 > y_2
        centre = m2 - side * v2 / b2  # the exponentially tilted normal's mean
        tau = side * (centre - y2) / sv  # truncation point in the tilted normal's units
        log_mass = lead + side * (y2 - m2) / b2 + special.log_ndtr(tau)
        # quantile u of the normal truncated to the side of y_2: s_2 = centre -+ sv t
        t = special.ndtri_exp(log_u[:, None] + np.ravel(special.log_ndtr(tau))[None, :])
        s2 = np.ravel(centre)[None, :] - side * np.ravel(sv)[None, :] * t
        shape = np.shape(log_mass)
        a = np.ravel(m1 + c12 / v2 * (s2.reshape((nodes,) + shape) - m2)).reshape(s2.shape)
        lg = _log_normal_laplace(y1, a, np.ravel(np.broadcast_to(w, shape))[None, :], b1)
        terms.append(np.ravel(log_mass) + special.logsumexp(lg, axis=0, b=wq[:, None]))
    return np.logaddexp(*terms).reshape(np.shape(log_mass))


_DROP = 30.0  # the box holds the posterior down to this below its largest log density
_COARSE = 41  # nodes per axis of the scan of the initial box


def _mode(fun, starts, scale):
    """The best local maximum of ``fun`` (on (mu, log sigma)) found by Nelder-Mead from
    each of ``starts``, in units of ``scale``; (theta, value)."""
    from scipy.optimize import minimize

    best = None
    for x0 in starts:
        res = minimize(lambda u, x0=x0: -fun(x0 + scale * u), np.zeros(2), method="Nelder-Mead",
                       options=dict(xatol=1e-6, fatol=1e-9, maxfev=2000,
                                    initial_simplex=[[0, 0], [0.5, 0], [0, 0.5]]))
        theta, value = x0 + scale * res.x, -float(res.fun)
        if best is None or value > best[1]:
            best = (theta, value)
    return best


def _laplace_sd(fun, theta, scale):
    """Posterior sd of (mu, log sigma) from a finite-difference Hessian at the mode (the
    scan's spacing where it is not negative definite)."""
    sd = np.asarray(scale, float)
    for _ in range(12):  # steps shrink until the second differences are resolved
        h = 1e-3 * sd
        hess = np.empty((2, 2))
        f0 = fun(theta)
        for i in range(2):
            for j in range(2):
                ei, ej = np.eye(2)[i] * h[i], np.eye(2)[j] * h[j]
                hess[i, j] = (fun(theta + ei + ej) - fun(theta + ei - ej) - fun(theta - ei + ej)
                              + fun(theta - ei - ej)) / (4 * h[i] * h[j])
        del f0
        if np.all(np.isfinite(hess)) and np.all(np.linalg.eigvalsh(hess) < 0):
            new = np.sqrt(np.diag(np.linalg.inv(-hess)))
            if np.all(new > 0.5 * sd):
                return new
            sd = new
        else:
            return np.asarray(scale, float)
    return sd


def central_posterior(release, prior=SECTION6, naive=False, grid=101, nodes=16):
    """p(mu, sigma | y_1, y_2) for a :class:`~dpbook.model.central_release.CentralRelease`, as a
    :class:`~dpbook.posterior.GridPosterior` on ``grid`` x ``grid`` nodes uniform in mu
    and log sigma (trapezoid weights; quantiles and cdf as for the exact posterior).

    The likelihood is :func:`log_likelihood` (``naive``: the noise ignored), the prior
    ``prior`` (Section 6's by default).  The box: a 41 x 41 scan of a wide box (mu over
    the prior's +-8 sd and the interval widened by 8 (r - l) on each side, sigma from
    1e-4 to 1e3 times r - l and the prior's 1e-6 and 1 - 1e-6 quantiles); the mode, by
    Nelder-Mead from the scan's best node and from the moment estimate (the noisy sums
    read as unclipped); the Laplace sd there; the box is the mode +- 6 sd together with
    the scan's nodes within 30 of the mode's log density, each side then pushed out (x2
    its distance from the mode) while the density on it is within 30 of the mode's.  A
    posterior much narrower than the scan's spacing (large n) is found by the moment
    start.  ``edge`` is the largest log density (w.r.t. d mu d log sigma) on the final
    grid's boundary minus the largest overall.  The final grid has ``grid`` nodes per
    axis, mode + 2 sd sinh(t) with t uniform, as the exact posterior's: dense at the mode
    and geometric in the tails, which are long (the Laplace noise makes the log density
    fall linearly, not quadratically, and a large sigma clips everything, so that mu is
    then barely identified).  Returns a
    :class:`~dpbook.posterior.grid_density.NodeGridPosterior`."""
    if not isinstance(prior, LocationScalePrior):
        raise ValueError(f"prior must be a LocationScalePrior, got {prior!r}")
    grid = check_count("grid", grid, 5)
    width = release.r - release.l
    psd = math.sqrt(prior.loc_var)
    from scipy import stats

    a, b = prior.scale2_shape, prior.scale2_scale
    s_lo, s_hi = np.sqrt(stats.invgamma.ppf([1e-6, 1 - 1e-6], a, scale=b))
    limits = np.array([min(prior.loc_mean - 8 * psd, release.l - 8 * width),
                       max(prior.loc_mean + 8 * psd, release.r + 8 * width),
                       math.log(min(1e-4 * width, s_lo)), math.log(max(1e3 * width, s_hi))])

    def log_density(mus, vs):  # w.r.t. d mu d sigma, and w.r.t. d mu d log sigma
        sig = np.exp(vs)
        lp = (log_likelihood(release, mus[:, None], sig[None, :], naive, nodes)
              + prior.log_density(mus[:, None], sig[None, :]))
        return lp, lp + vs[None, :]

    def fun(theta):
        if not (limits[0] <= theta[0] <= limits[1] and limits[2] <= theta[1] <= limits[3]):
            return -np.inf
        return float(log_density(np.array([theta[0]]), np.array([theta[1]]))[1][0, 0])

    mus = np.linspace(limits[0], limits[1], _COARSE)
    vs = np.linspace(limits[2], limits[3], _COARSE)
    lpv = log_density(mus, vs)[1]
    i, j = np.unravel_index(np.argmax(lpv), lpv.shape)
    spacing = np.array([mus[1] - mus[0], vs[1] - vs[0]])
    m1, m2 = release.y1 / release.n, release.y2 / release.n
    guess = np.clip([release.centre + m1, 0.5 * math.log(max(m2 - m1 * m1, 1e-6 * width**2))],
                    limits[0::2] + spacing, limits[1::2] - spacing)
    mode, top = _mode(fun, [np.array([mus[i], vs[j]]), guess], spacing)
    sd = np.minimum(_laplace_sd(fun, mode, spacing), 0.25 * (limits[1::2] - limits[0::2]))
    box = np.array([mode[0] - 6 * sd[0], mode[0] + 6 * sd[0],
                    mode[1] - 6 * sd[1], mode[1] + 6 * sd[1]])
    near = lpv > top - _DROP
    if near.any():
        rows, cols = np.flatnonzero(near.any(axis=1)), np.flatnonzero(near.any(axis=0))
        box = np.array([min(box[0], mus[max(rows[0] - 1, 0)]),
                        max(box[1], mus[min(rows[-1] + 1, _COARSE - 1)]),
                        min(box[2], vs[max(cols[0] - 1, 0)]),
                        max(box[3], vs[min(cols[-1] + 1, _COARSE - 1)])])
    box = np.clip(box, np.repeat(limits[0::2], 2), np.repeat(limits[1::2], 2))
    centre = np.repeat(mode, 2)
    for _ in range(40):
        line_mu, line_v = np.linspace(box[0], box[1], 32), np.linspace(box[2], box[3], 32)
        sides = (log_density(box[:1], line_v)[1], log_density(box[1:2], line_v)[1],
                 log_density(line_mu, box[2:3])[1], log_density(line_mu, box[3:4])[1])
        push = np.array([side.max() > top - _DROP for side in sides])
        push &= np.abs(box - np.array([limits[0], limits[1], limits[2], limits[3]])) > 0
        if not push.any():
            break
        box = np.where(push, centre + 2.0 * (box - centre), box)
        box = np.clip(box, np.repeat(limits[0::2], 2), np.repeat(limits[1::2], 2))
    # sinh grids: x = mode + 2 sd sinh(t), t uniform (dense at the mode, geometric in
    # the tails, which the Laplace noise and clipping make long)
    (mus, w_mu), (vs, w_v) = (_sinh_axis(box[2 * i], box[2 * i + 1], grid, mode[i], 2 * sd[i])
                              for i in range(2))
    lp, lpv = log_density(mus, vs)
    sig = np.exp(vs)
    w_sig = w_v * sig  # d sigma = sigma d log sigma
    log_z = float(special.logsumexp(lp + np.log(w_mu)[:, None] + np.log(w_sig)[None, :]))
    edge = max(lpv[0].max(), lpv[-1].max(), lpv[:, 0].max(), lpv[:, -1].max()) - lpv.max()
    return NodeGridPosterior(params=("mu", "sigma"), axes=[mus, sig], log_post=lp - log_z,
                            log_evidence=log_z, edge=float(edge), weights=[w_mu, w_sig],
                            log_axes=(False, True))


def _sinh_axis(lo, hi, k, centre, scale):
    """k nodes x = centre + scale sinh(t), t uniform, from lo to hi, and their
    trapezoid weights (times dx/dt)."""
    t = np.linspace(math.asinh((lo - centre) / scale), math.asinh((hi - centre) / scale), k)
    x = centre + scale * np.sinh(t)
    w = (t[1] - t[0]) * scale * np.cosh(t)
    w[[0, -1]] *= 0.5
    return x, w


def sum_cdf(which, y, mu, sigma, n, l, r, b):
    """The normal approximation's cdf of one released sum, y_1 (``which`` = 1) or y_2
    (2): P(s + L <= y) with s ~ N(m_j, v_j) (:func:`sum_moments`) and L ~ Laplace(b)
    (b = 0: the sum without noise).  What chapter 11 and the tests compare simulated
    releases with, to see where the normal approximation of the sums holds."""
    m1, m2, v1, v2, _ = sum_moments(mu, sigma, n, l, r)
    m, v = (m1, v1) if which == 1 else (m2, v2)
    y = np.asarray(y, float)
    s = np.sqrt(v)
    if b == 0:
        return special.ndtr((y - m) / s)
    lead = 0.5 * v / b**2
    below = np.exp(lead + (m - y) / b + special.log_ndtr((y - m - v / b) / s))
    above = np.exp(lead + (y - m) / b + special.log_ndtr((m - y - v / b) / s))
    return special.ndtr((y - m) / s) - 0.5 * below + 0.5 * above
