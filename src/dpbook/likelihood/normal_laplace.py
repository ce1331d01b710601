"""Deterministic (no Monte Carlo) references for the normal model of Section 6.

X ~ N(mu, sigma^2) is released as Y = T_l^r(X) + b V with V ~ Laplace(1), i.e.
Laplace noise of scale b = (r - l)/eps (eq. 2 and 10).  This module gives

* the exact log density log p_{l,r}^eps(y | theta) of one release and its score
  (gradient w.r.t. theta = (mu, sigma)), in closed form;
* the exact Fisher information F_{l,r}^eps(theta) of eq. (7) by quadrature, which
  replaces the Monte Carlo estimate (8) / Algorithm 4;
* the exact posterior (5) of theta given released data, on a grid.

Closed form.  Given Y = y, the latent X has a posterior that is a mixture of four
truncated normals (u = T_l^r(y)):

    j  support     normal            log weight (up to -log 2b)
    1  (-inf, l]   N(mu, s^2)        log Phi((l - mu)/s) - |y - l|/b
    2  [l, u]      N(mu + s^2/b, s^2)  (mu - y)/b + s^2/(2 b^2) + log[Phi(.) - Phi(.)]
    3  [u, r]      N(mu - s^2/b, s^2)  (y - mu)/b + s^2/(2 b^2) + log[Phi(.) - Phi(.)]
    4  [r, inf)    N(mu, s^2)        log Phi((mu - r)/s) - |y - r|/b

(components 2 and 3 complete the square in N(x; mu, s^2) exp(-|y - x|/b)); the log
density is the log-sum-exp of the four log weights minus log 2b.  All weights are
formed in log space because s^2/(2 b^2) reaches ~10^4 for narrow intervals.  The
score follows from Fisher's identity (Appendix C, the identity behind Algorithm 4):
grad log p(y) = E[grad log N(X; mu, s^2) | Y = y], a weighted sum of closed-form
truncated-normal first and second moments.

The grid posterior sums log p(y_t | theta) over observations and grid points in a
compiled, parallel numba kernel (the same mixture, in linear space when that is safe,
else in log space); it agrees with :func:`log_density` to ~1e-13.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from scipy import special

from dpbook.likelihood.compiled import CompiledScore
from dpbook.validation import (
    check_count,
    check_eps,
    check_finite,
    check_interval,
    kernel_arrays,
    refuse_not_real_array,
)

__all__ = ["log_density", "score", "fisher_exact", "GL_NODES"]

_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_PI_2 = math.sqrt(math.pi / 2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------------------- checks


def _check_positive_array(name, values) -> np.ndarray:
    refuse_not_real_array(name, values)
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be positive finite numbers") from None
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{name} must be positive finite numbers")
    return a


def _check_eps_array(eps) -> np.ndarray:
    return np.asarray(check_eps(eps)) if np.ndim(eps) == 0 else _check_positive_array("eps", eps)


def _check_args(y, l, r, eps, mu, sigma):
    y = check_finite("y", y)
    l, r = check_interval(l, r)
    eps = _check_eps_array(eps)
    mu = check_finite("mu", mu)
    sigma = _check_positive_array("sigma", sigma)
    return y, l, r, eps, mu, sigma


# ------------------------------------------------------------ truncated normal stats


def _tn_stats(alpha, beta):
    """Standard normal truncated to [alpha, beta] (alpha <= beta, ends may be infinite).

    The interval is reflected, when alpha + beta > 0, to [a, c] = [-beta, -alpha], so
    that a + c <= 0.  Returns (log Zs, E[Z0], Var[Z0], case_a, flip) with
    Z = Phi(beta) - Phi(alpha) and

    * case A (c <= 0, both ends in the lower tail): log Zs = log Z + c^2/2, from the
      Mills-ratio form Phi(x) = phi(x) R(x), R(x) = sqrt(pi/2) erfcx(-x/sqrt2), which
      keeps every ratio accurate however far in the tail (the caller adds the -c^2/2
      analytically, where it cancels against the completed square);
    * case B (a < 0 < c): log Zs = log Z with Z = (erf(c/sqrt2) - erf(a/sqrt2))/2,
      which has no cancellation.

    Zero-width intervals get log Zs = -inf (and finite dummy moments).
    """
    alpha, beta = np.broadcast_arrays(np.asarray(alpha, float), np.asarray(beta, float))
    flip = (alpha + beta) > 0
    a = np.where(flip, -beta, alpha)
    c = np.where(flip, -alpha, beta)
    fa = np.isfinite(a)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # case A: c <= 0
        expo = 0.5 * (c - a) * (c + a)  # log(phi(a)/phi(c)) <= 0; -inf if a = -inf
        e = np.exp(expo)
        rc = _SQRT_PI_2 * special.erfcx(-c / _SQRT2)
        ra = _SQRT_PI_2 * special.erfcx(-a / _SQRT2)
        d = rc - np.where(fa, e * ra, 0.0)
        m1a = special.expm1(expo) / d
        m2a = 1.0 + (np.where(fa, a * e, 0.0) - c) / d
        logza = np.log(d) - _LOG_SQRT_2PI
        oka = d > 0
        # case B: a < 0 < c
        z = 0.5 * (special.erf(c / _SQRT2) - special.erf(a / _SQRT2))
        pa = np.where(fa, np.exp(-0.5 * a * a), 0.0) / math.sqrt(2 * math.pi)
        pc = np.exp(-0.5 * c * c) / math.sqrt(2 * math.pi)
        m1b = (pa - pc) / z
        m2b = 1.0 + (np.where(fa, a * pa, 0.0) - c * pc) / z
        logzb = np.log(z)
    case_a = c <= 0
    logz = np.where(case_a, logza, logzb)
    m1 = np.where(case_a, m1a, m1b)
    var = np.where(case_a, m2a, m2b) - m1 * m1
    ok = np.where(case_a, oka, z > 0) & (a < c)
    logz = np.where(ok, logz, -np.inf)
    m1 = np.where(ok, np.where(flip, -m1, m1), 0.0)
    var = np.where(ok, np.maximum(var, 0.0), 0.0)
    return logz, m1, var, case_a, flip


def _posterior_components(y, l, r, eps, mu, sigma):
    """Log weights, standardised means t_j = E_j[(X - mu)/s] and variances of the four
    truncated-normal components of X | Y = y (stacked on a new last axis), and log 2b.

    Component j is N(mu + delta_j s, s^2) on [A_j, B_j] with weight
    exp(logc_j) (Phi(beta_j) - Phi(alpha_j)).  When the truncation is in a tail (case
    A of _tn_stats) the weight is formed as e_j + log Zs_j with
    e_j = logc_j - c_j^2/2 simplified by hand, e.g. for j = 2 and c = beta_2:
    (mu - y)/b + k^2/2 - (z_u - k)^2/2 = (u - y)/b - z_u^2/2, so the large k^2/2
    (k = s/b up to ~10^4 and beyond) never appears.
    """
    y, l, r, eps, mu, sigma = np.broadcast_arrays(y, l, r, eps, mu, sigma)
    b = (r - l) / eps
    u = np.minimum(np.maximum(y, l), r)
    zl = (l - mu) / sigma
    zr = (r - mu) / sigma
    zu = (u - mu) / sigma
    k = sigma / b
    half_k2 = 0.5 * k * k
    inf = np.full_like(zl, np.inf)
    alpha = np.stack([-inf, zl - k, zu + k, zr], axis=-1)
    beta = np.stack([zl, zu - k, zr + k, inf], axis=-1)
    delta = np.stack([np.zeros_like(k), k, -k, np.zeros_like(k)], axis=-1)  # (m_j - mu)/s
    e1 = -np.abs(y - l) / b
    e4 = -np.abs(y - r) / b
    logc = np.stack([e1, (mu - y) / b + half_k2, (y - mu) / b + half_k2, e4], axis=-1)
    hl = 0.5 * zl * zl
    hr = 0.5 * zr * zr
    hu = 0.5 * zu * zu
    e_unflipped = np.stack([e1 - hl, (u - y) / b - hu, (y - r) / b - hr, e4 - hr], axis=-1)
    e_flipped = np.stack([e1 - hl, (l - y) / b - hl, (y - u) / b - hu, e4 - hr], axis=-1)
    logz, m1, var, case_a, flip = _tn_stats(alpha, beta)
    logw = np.where(case_a, np.where(flip, e_flipped, e_unflipped), logc) + logz
    return logw, delta + m1, var, np.log(2.0 * b)


def logp_and_score(y, l, r, eps, mu, sigma):
    """(log p(y | theta), score) without input checks; score has a trailing axis of 2."""
    logw, t, var, log2b = _posterior_components(y, l, r, eps, mu, sigma)
    lse = special.logsumexp(logw, axis=-1)
    pi = np.exp(logw - lse[..., None])
    sigma = np.broadcast_to(sigma, lse.shape)
    s_mu = np.sum(pi * t, axis=-1) / sigma
    s_sigma = (np.sum(pi * (t * t + var), axis=-1) - 1.0) / sigma
    return lse - log2b, np.stack([s_mu, s_sigma], axis=-1)


# ------------------------------------------------------------------ public: density


def log_density(y, l, r, eps, mu, sigma):
    """Exact log p_{l,r}^eps(y | mu, sigma) of one release Y = T_l^r(X) + (r - l) V.

    The marginal density of a single observation that appears in eq. (7) and, as a
    factor of the likelihood, in the posterior (5) after integrating out x:

        p(y) = Phi(alpha) L(y - l) + (1 - Phi(beta)) L(y - r)
               + int_l^r N(x; mu, sigma^2) L(y - x) dx,

    alpha = (l - mu)/sigma, beta = (r - mu)/sigma, L the Laplace(b) density,
    b = (r - l)/eps (eq. 2, 10).  Computed in log space as a four-component mixture
    (see the module docstring).  Broadcasts over all arguments.
    """
    y, l, r, eps, mu, sigma = _check_args(y, l, r, eps, mu, sigma)
    logw, _, _, log2b = _posterior_components(y, l, r, eps, mu, sigma)
    out = special.logsumexp(logw, axis=-1) - log2b
    return out if out.ndim else float(out)


def score(y, l, r, eps, mu, sigma):
    """Exact score grad_theta log p_{l,r}^eps(y | theta), theta = (mu, sigma).

    Fisher's identity (Appendix C, the identity that Algorithm 4 approximates by
    self-normalised importance sampling):

        grad log p(y) = E[grad log N(X; mu, sigma^2) | Y = y]
                      = sum_j pi_j ( E_j[X - mu]/sigma^2,
                                     (E_j[(X - mu)^2]/sigma^2 - 1)/sigma ),

    with pi_j and E_j the weights and closed-form truncated-normal moments of the four
    components of X | Y = y.  Broadcasts over all arguments; output shape (..., 2).
    """
    y, l, r, eps, mu, sigma = _check_args(y, l, r, eps, mu, sigma)
    return logp_and_score(y, l, r, eps, mu, sigma)[1]


# ------------------------------------------------------------------- public: Fisher

GL_NODES = 48
"""Gauss-Legendre nodes per panel for the middle part of the Fisher integral.

Chosen by the convergence study in tests/test_exact.py (against scipy.integrate.quad at
eps = 10 with narrow and wide intervals): see ``fisher_exact``.
"""
_PANEL_BREAKS = 6.0  # panels of [a, b] split at standardised +-6


def fisher_exact(l, r, eps, mu=0.0, sigma=1.0, *, nodes: int = GL_NODES):
    """Exact Fisher information F_{l,r}^eps(theta) of eq. (7), theta = (mu, sigma).

    F = E[s(Y) s(Y)^T] with s the exact score (see :func:`score`), Y one release.
    By Theorem 3 (Appendix B: Y is location-scale), F_{l,r}(mu, sigma) =
    F_{a,b}(0, 1)/sigma^2 with a = (l - mu)/sigma, b = (r - mu)/sigma, so the integral
    is done for the standard normal.  For y <= a the density is p(a) exp((y - a)/B)
    (B = (b - a)/eps) and the score is constant, s(y) = s(a); likewise above b.  Hence

        F = B [p(a) s(a) s(a)^T + p(b) s(b) s(b)^T] + int_a^b p(y) s(y) s(y)^T dy,

    and the last integral has a smooth integrand, done by Gauss-Legendre with ``nodes``
    nodes on each of up to three panels (split at +-6).  Broadcasts over l, r, eps, mu,
    sigma; output shape (..., 2, 2).
    """
    _, l, r, eps, mu, sigma = _check_args(0.0, l, r, eps, mu, sigma)
    nodes = check_count("nodes", nodes)
    l, r, eps, mu, sigma = np.broadcast_arrays(l, r, eps, mu, sigma)
    a = (l - mu) / sigma
    b = (r - mu) / sigma
    scale = (b - a) / eps
    tiny = scale < MIN_NOISE_SCALE
    if np.any(tiny):
        # the closed form's deep-tail mixture weights lose digits at such noise scales:
        # the quadrature's small-noise rule computes these elements instead
        from dpbook.likelihood import fisher_quadrature

        out = np.empty(a.shape + (2, 2))
        keep = ~tiny
        if keep.any():
            out[keep] = fisher_exact(a[keep], b[keep], eps[keep], nodes=nodes)
        for e in np.unique(eps[tiny]):
            sel = tiny & (eps == e)
            out[sel] = fisher_quadrature.fisher_exact(a[sel], b[sel], float(e), (0.0, 1.0),
                                               "normal", "laplace")
        return out / (sigma * sigma)[..., None, None]

    shape = a.shape
    a, b, eps, scale = a.ravel(), b.ravel(), eps.ravel(), scale.ravel()
    # tails: y <= a and y >= b
    ends = np.stack([a, b], axis=-1)
    lp, s = logp_and_score(ends, a[:, None], b[:, None], eps[:, None], 0.0, 1.0)
    outer = s[..., :, None] * s[..., None, :]
    f = scale[:, None, None] * np.sum(np.exp(lp)[..., None, None] * outer, axis=-3)
    # the integrals of p(y) and of p(y) s(y), 1 and 0 in exact arithmetic: how well the
    # rule resolved the score (checked by resolve)
    sums = scale[:, None] * np.sum(np.exp(lp)[..., None] * np.concatenate(
        [np.ones_like(s[..., :1]), s], axis=-1), axis=-2)
    # middle: composite Gauss-Legendre on [a, k1], [k1, k2], [k2, b]; a single panel
    # when no interval reaches beyond +-6 standard deviations
    pts = np.stack([a, b], axis=-1)
    if np.any((a < -_PANEL_BREAKS) | (b > _PANEL_BREAKS)):
        pts = np.stack([a, np.clip(-_PANEL_BREAKS, a, b), np.clip(_PANEL_BREAKS, a, b), b],
                       axis=-1)
    mid, mid_sums = _gauss_legendre_sum(pts[:, :-1], pts[:, 1:], a, b, eps, nodes)
    # Large eps: p(y) has spikes of width B at a and b (the clipped masses, smoothed by
    # the noise) that the panels above miss; redo those intervals with panels at
    # a + B (0, 1, 3, 7, 15, 40), their mirror at b, and the default panels between.
    # Never the case for eps <= 2 _SPIKE_EFOLDS (the book's eps).
    fine = _SPIKE_EFOLDS * scale < 0.5 * (b - a)
    if np.any(fine):
        af, bf, B = a[fine, None], b[fine, None], scale[fine, None]
        left, right = af + B * _SPIKE_STEPS, bf - B * _SPIKE_STEPS[::-1]
        inner = [np.clip(k, left[:, -1:], right[:, :1]) for k in (-_PANEL_BREAKS, _PANEL_BREAKS)]
        pts = np.concatenate([left, *inner, right], axis=-1)
        mid[fine], mid_sums[fine] = _gauss_legendre_sum(pts[:, :-1], pts[:, 1:], a[fine],
                                                        b[fine], eps[fine], nodes)
    f = f + mid
    f = 0.5 * (f + np.swapaxes(f, -1, -2))  # exactly symmetric
    from dpbook.likelihood import fisher_quadrature

    def second_try(k):  # adaptive quadrature of the closed form's density and score
        from dpbook.likelihood.adaptive import fisher_adaptive
        from dpbook.model.mechanisms import get_mechanism

        def pointwise(y):
            return logp_and_score(y, a[k], b[k], eps[k], 0.0, 1.0)

        return fisher_adaptive(pointwise, a[k], b[k], (b[k] - a[k]) / eps[k], 2,
                               get_mechanism("laplace"), (-_PANEL_BREAKS, 0.0, _PANEL_BREAKS))

    f = fisher_quadrature.resolve(f, sums + mid_sums, l.ravel(), r.ravel(), eps, "normal",
                                  second_try).reshape(shape + (2, 2))
    return f / (sigma * sigma)[..., None, None]


MIN_NOISE_SCALE = 1e-6  # (r - l)/(eps sigma): below it the closed form loses digits and
# the quadrature's small-noise rule (dpbook.likelihood.quadrature) takes over
_SPIKE_EFOLDS = 40.0  # the spikes decay as e^{-|y - a|/B}: 40 e-folds are e^-40 ~ 4e-18
_SPIKE_STEPS = np.array([0.0, 1.0, 3.0, 7.0, 15.0, _SPIKE_EFOLDS])


def _gauss_legendre_sum(lo, hi, a, b, eps, nodes):
    """sum over the panels [lo_k, hi_k] (shape (K, P)) of int p(y) s(y) s(y)^T dy, and of
    int p(y) (1, s(y)) dy (shape (K, 3))."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    half = 0.5 * (hi - lo)[..., None]
    yy = (0.5 * (hi + lo)[..., None] + half * x).reshape(lo.shape[0], -1)
    ww = (half * w).reshape(lo.shape[0], -1)
    lp, s = logp_and_score(yy, a[:, None], b[:, None], eps[:, None], 0.0, 1.0)
    pw = ww * np.exp(lp)
    return np.einsum("kn,kni,knj->kij", pw, s, s), np.concatenate(
        [pw.sum(axis=-1)[:, None], np.einsum("kn,kni->ki", pw, s)], axis=-1)


def fisher_exact_theta(l, r, eps, theta=None):
    """:func:`fisher_exact` with theta = (mu, sigma) as one tuple (None: (0, 1)): the
    backend of :func:`dpbook.fisher.fisher_exact` for the normal family, Laplace
    mechanism."""
    mu, sigma = (0.0, 1.0) if theta is None else theta
    return fisher_exact(l, r, eps, mu, sigma)


# ---------------------------------------------------------------- numba log density


@njit(cache=True)
def _nb_mills_series(x):
    """1 - 1/x^2 + 3/x^4 - ...: Phi(x) = phi(x)/(-x) * series, x <= -30."""
    z = 1.0 / (x * x)
    return 1.0 - z * (1.0 - 3.0 * z * (1.0 - 5.0 * z * (1.0 - 7.0 * z * (1.0 - 9.0 * z * (
        1.0 - 11.0 * z * (1.0 - 13.0 * z))))))


@njit(cache=True)
def _nb_log_ndtr(x):
    """log Phi(x), accurate in both tails."""
    if x > 6.0:
        return -0.5 * math.erfc(x / _SQRT2)  # log1p(-q) with q < 1e-9: error q^2/2
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x / _SQRT2))
    # asymptotic series of the Mills ratio; first omitted term < 1e-18 at x = -30
    return -0.5 * x * x - math.log(-x) - _LOG_SQRT_2PI + math.log(_nb_mills_series(x))


@njit(cache=True)
def _nb_log1mexp(d):
    """log(1 - exp(d)) for d <= 0."""
    if d > -0.6931471805599453:
        return math.log(-math.expm1(d))
    return math.log1p(-math.exp(d))


@njit(cache=True)
def _nb_scaled_diff(lo, hi):
    """log(Phi(hi) - Phi(lo)) + hi^2/2 for lo < hi <= 0 (-inf if lo >= hi)."""
    if hi <= lo:
        return -math.inf
    if hi > -37.0:
        return math.log(0.5 * (math.erfc(-hi / _SQRT2) - math.erfc(-lo / _SQRT2))) + 0.5 * hi * hi
    shi = _nb_mills_series(hi)
    d = -0.5 * (lo - hi) * (lo + hi) + math.log(hi / lo) + math.log(_nb_mills_series(lo) / shi)
    if d >= 0.0:
        return -math.inf
    return -math.log(-hi) - _LOG_SQRT_2PI + math.log(shi) + _nb_log1mexp(d)


@njit(cache=True)
def _nb_middle(lo, hi, e_hi, e_lo, e_mid):
    """log of exp(c) (Phi(hi) - Phi(lo)) for a middle component, lo <= hi.

    e_hi = c - hi^2/2 and e_lo = c - lo^2/2 (simplified by the caller, so that the
    completed square k^2/2 inside c cancels exactly); e_mid = c is used only when
    lo < 0 < hi, where that component is negligible if c is large.
    """
    if hi <= lo:
        return -math.inf
    if hi <= 0.0:
        return e_hi + _nb_scaled_diff(lo, hi)
    if lo >= 0.0:
        return e_lo + _nb_scaled_diff(-hi, -lo)
    return e_mid + math.log(0.5 * (math.erf(hi / _SQRT2) - math.erf(lo / _SQRT2)))


@njit(cache=True)
def _nb_logpdf_log(y, l, r, invb, log2b, mu, sigma):
    """Scalar log p(y | mu, sigma) in log space: the four-component mixture of log_density."""
    zl = (l - mu) / sigma
    zr = (r - mu) / sigma
    u = min(max(y, l), r)
    zu = (u - mu) / sigma
    k = sigma * invb
    h = 0.5 * k * k
    t1 = _nb_log_ndtr(zl) - abs(y - l) * invb
    t4 = _nb_log_ndtr(-zr) - abs(y - r) * invb
    # component 2: exp((mu - y)/b + h) [Phi(zu - k) - Phi(zl - k)] on [l, u]
    t2 = _nb_middle(zl - k, zu - k, (u - y) * invb - 0.5 * zu * zu,
                    (l - y) * invb - 0.5 * zl * zl, (mu - y) * invb + h)
    # component 3: exp((y - mu)/b + h) [Phi(-zu - k) - Phi(-zr - k)] on [u, r]
    t3 = _nb_middle(-zr - k, -zu - k, (y - u) * invb - 0.5 * zu * zu,
                    (y - r) * invb - 0.5 * zr * zr, (y - mu) * invb + h)
    m = max(max(t1, t2), max(t3, t4))
    acc = math.exp(t1 - m) + math.exp(t4 - m)
    if t2 > -math.inf:
        acc += math.exp(t2 - m)
    if t3 > -math.inf:
        acc += math.exp(t3 - m)
    return m + math.log(acc) - log2b


@njit(inline="always")
def _cdf_diff_cached(lo, hi, c, e):
    """(Phi(hi) - Phi(lo), c, e) as :func:`normal_cdf_diff`, with its lower end's erfc
    (``c``) or erf (``e``) cached (nan: not yet computed, then computed here; which one
    a branch needs depends on lo's sign only)."""
    if hi <= lo:
        return 0.0, c, e
    if lo >= 0.0:
        if c != c:
            c = math.erfc(lo / _SQRT2)
        return 0.5 * (c - math.erfc(hi / _SQRT2)), c, e
    if hi <= 0.0:
        if c != c:
            c = math.erfc(-lo / _SQRT2)
        return 0.5 * (math.erfc(-hi / _SQRT2) - c), c, e
    if e != e:
        e = math.erf(lo / _SQRT2)
    return 0.5 * (math.erf(hi / _SQRT2) - e), c, e


@njit(cache=True)
def normal_cdf_diff(lo, hi):
    """Phi(hi) - Phi(lo) (0 for hi <= lo), from the tail on the side both lie: no
    cancellation of two values near 1 (compiled; the online gradient's score uses it
    too)."""
    return _cdf_diff_cached(lo, hi, math.nan, math.nan)[0]


@njit(cache=True)
def _phi(z):
    return _INV_SQRT2PI * math.exp(-0.5 * z * z)


@njit(cache=True)
def _Phi(z):
    return 0.5 * math.erfc(-z / _SQRT2)


@njit(cache=True)
def _score_normal_laplace(y, l, r, b, m, s):
    """(ok, d/dm, d/ds) of log p(y | m, s) for the normal family and the Laplace
    mechanism: the derivatives of the density's closed form (the four terms of
    :func:`log_density`, in linear space),

        p 2b = Phi(zl) e^{-|y-l|/b} + Phi(-zr) e^{-|y-r|/b}
               + e^{dm + h} [Phi(zu - k) - Phi(zl - k)] + e^{h - dm} [Phi(-zu - k) - Phi(-zr - k)],

    z. = (. - m)/s, u = y clipped to [l, r], k = s/b, h = k^2/2, dm = (m - y)/b.
    ok is False where that form may lose precision (large k or |dm|, tiny density):
    then the caller takes the log-space score instead (:func:`score`).  The online
    gradient's score (Section 7), 1000 times faster than :func:`score`."""
    k = s / b
    dm = (m - y) / b
    if k > 20.0 or abs(dm) > 200.0:
        return False, 0.0, 0.0
    zl, zr = (l - m) / s, (r - m) / s
    zu = (min(max(y, l), r) - m) / s
    h = 0.5 * k * k
    el, er = math.exp(-abs(y - l) / b), math.exp(-abs(y - r) / b)
    p = _Phi(zl) * el + _Phi(-zr) * er
    g_m = -_phi(zl) / s * el + _phi(zr) / s * er
    g_s = -_phi(zl) * zl / s * el + _phi(zr) * zr / s * er
    if y > l:
        e = math.exp(dm + h)
        d = normal_cdf_diff(zl - k, zu - k)
        p += e * d
        g_m += e * (d / b - (_phi(zu - k) - _phi(zl - k)) / s)
        g_s += e * (d * k / b - _phi(zu - k) * (zu / s + 1.0 / b)
                    + _phi(zl - k) * (zl / s + 1.0 / b))
    if y < r:
        e = math.exp(h - dm)
        d = normal_cdf_diff(-zr - k, -zu - k)
        p += e * d
        g_m += e * (-d / b + (_phi(-zu - k) - _phi(-zr - k)) / s)
        g_s += e * (d * k / b + _phi(-zu - k) * (zu / s - 1.0 / b)
                    - _phi(-zr - k) * (zr / s - 1.0 / b))
    if not p > 1e-100:
        return False, 0.0, 0.0
    return True, g_m / p, g_s / p


@njit(cache=True)
def _score_kernel(y, l, r, b, m, s, ctx):
    """:func:`_score_normal_laplace` as a :class:`~dpbook.likelihood.compiled.CompiledScore`
    kernel (no state: ``ctx`` is empty)."""
    return _score_normal_laplace(y, l, r, b, m, s)


# The paper model's score for the online gradient (dpbook.backends, "score"): the
# compiled closed form, its log-space form where that may lose precision
compiled_score = CompiledScore(_score_kernel, (), score)


@njit(inline="always")
def _nb_loglik_run(y, l, r, invb, log2b, el, er, mu, sigma, out, j):
    """sum_t log p(y_t | mu, sigma), in t order; with ``out`` of a row per release,
    also out[t, j] = each term.  el, er = exp(-|y - l|/b), exp(-|y - r|/b).

    Fast path in linear space when the completed-square factors exp(c) stay moderate
    (k = sigma/b <= 20, |mu - y|/b <= 200, so c <= 400) and the density is not tiny
    (> 1e-100 times 2b): then any Phi that underflows (argument < -37) contributes
    < e^-280 and is negligible.  Otherwise the log-space evaluation.  What depends on
    the interval and theta only (k, the z's, the tails' Phi, the lower ends of the two
    Phi differences) is computed once for a run of releases with the same interval (a
    fixed interval, a batch): the same operations on the same values, so the same bits
    as computing every term afresh, in a third of the special-function calls.
    """
    nan = math.nan
    acc = 0.0
    lp = rp = bp = nan
    k = zl = zr = h = lo1 = lo2 = pl = pr = c1 = e1 = c2 = e2 = nan
    for t in range(y.shape[0]):
        if not (l[t] == lp and r[t] == rp and invb[t] == bp):  # a new interval
            lp, rp, bp = l[t], r[t], invb[t]
            k = sigma * bp
            zl = (lp - mu) / sigma
            zr = (rp - mu) / sigma
            h = 0.5 * k * k
            lo1, lo2 = zl - k, -zr - k
            pl = pr = c1 = e1 = c2 = e2 = nan
        yt = y[t]
        dm = (mu - yt) * bp
        v = nan
        if k <= 20.0 and abs(dm) <= 200.0:
            zu = (min(max(yt, lp), rp) - mu) / sigma
            if pl != pl:
                pl = 0.5 * math.erfc(-zl / _SQRT2)
                pr = 0.5 * math.erfc(zr / _SQRT2)
            s = pl * el[t] + pr * er[t]
            if yt > lp:
                d, c1, e1 = _cdf_diff_cached(lo1, zu - k, c1, e1)
                s += math.exp(dm + h) * d
            if yt < rp:
                d, c2, e2 = _cdf_diff_cached(lo2, -zu - k, c2, e2)
                s += math.exp(h - dm) * d
            if s > 1e-100:
                v = math.log(s) - log2b[t]
        if v != v:
            v = _nb_logpdf_log(yt, lp, rp, bp, log2b[t], mu, sigma)
        if out.shape[0] > 1:
            out[t, j] = v
        acc += v
    return acc


def _kernel_args(y, l, r, eps, mu, sigma):
    """The arguments of the compiled sums: y, l, r, 1/b, log 2b, exp(-|y - l|/b),
    exp(-|y - r|/b), mu, sigma as contiguous float arrays (:func:`kernel_arrays`)."""
    y, l, r = kernel_arrays(y, l, r)
    b = (r - l) / eps
    invb = 1.0 / b
    return (y, l, r, invb, np.log(2.0 * b), np.exp(-np.abs(y - l) * invb),
            np.exp(-np.abs(y - r) * invb), np.ascontiguousarray(mu, dtype=float),
            np.ascontiguousarray(sigma, dtype=float))


@njit(parallel=True, cache=True)
def _nb_loglik_rows(y, l, r, invb, log2b, el, er, mu, sigma, sums, terms):
    """sums[i] = sum_t log p(y_t | mu_i, sigma_i), threads over i (each sum in t order,
    so the result does not depend on the number of threads); with ``terms`` of two rows
    or more, also terms[t, i] = each term."""
    for i in prange(mu.shape[0]):
        sums[i] = _nb_loglik_run(y, l, r, invb, log2b, el, er, mu[i], sigma[i], terms, i)


@njit(cache=True)
def _nb_loglik_rows_serial(y, l, r, invb, log2b, el, er, mu, sigma, sums, terms):
    """:func:`_nb_loglik_rows` in one thread (for a handful of terms)."""
    for i in range(mu.shape[0]):
        sums[i] = _nb_loglik_run(y, l, r, invb, log2b, el, er, mu[i], sigma[i], terms, i)


def loglik_grid(y, l, r, eps, mu_grid, sigma_grid):
    """Sum over observations of log p(y_t | mu_i, sigma_j) on the grid (numba)."""
    mu, sigma = np.meshgrid(np.asarray(mu_grid, dtype=float),
                            np.asarray(sigma_grid, dtype=float), indexing="ij")
    out = np.empty(mu.size)
    _nb_loglik_rows(*_kernel_args(y, l, r, eps, mu.ravel(), sigma.ravel()), out,
                    np.empty((1, 1)))
    return out.reshape(mu.shape)


def loglik_particles(y, l, r, eps, theta):
    """sum_t log p(y_t | theta_i) for each row theta_i = (mu_i, sigma_i) of ``theta``
    (numba, parallel over the rows): the likelihood of the marginal SMC's reweighting
    and moves (:mod:`dpbook.online.ibis`).  No input checks."""
    theta = np.asarray(theta, dtype=float)
    out = np.empty(theta.shape[0])
    args = _kernel_args(y, l, r, eps, theta[:, 0], theta[:, 1])
    # threads pay off from a few hundred terms (one release to 1000 particles: 158 us
    # with 2 threads, 313 us with one)
    kernel = _nb_loglik_rows if args[0].size * out.size > 256 else _nb_loglik_rows_serial
    kernel(*args, out, np.empty((1, 1)))
    return out


def loglik_terms(y, l, r, eps, theta):
    """log p(y_t | theta_i) for each release t and row theta_i = (mu_i, sigma_i) of
    ``theta``, shape (len(y), len(theta)) (numba, parallel over the rows): the marginal
    SMC's reweighting by a block of releases at once (:mod:`dpbook.online.ibis`); row t
    is, bit for bit, :func:`loglik_particles` of release t alone.  No input checks."""
    theta = np.asarray(theta, dtype=float)
    args = _kernel_args(y, l, r, eps, theta[:, 0], theta[:, 1])
    out = np.empty((args[0].size, theta.shape[0]))
    # one release: the sums are the terms
    _nb_loglik_rows(*args, out[0] if out.shape[0] == 1 else np.empty(theta.shape[0]), out)
    return out
