"""Fisher information of one box release of X ~ N_d(mu, Sigma), and the box search
(issue 54; the paper's eqs. 7-8, Algorithm 4, Section 5's sc(.) and Theorem 3 in 2-D).

theta = (mu_1..mu_d, sigma_1..sigma_d, rho_ij for i < j in row order).  The release of
a box [l, r] is Y_j = clip(X_j, l_j, r_j) + b_j V_j, V_j iid standard Laplace (or
normal, ``mechanism='gaussian'``), with one scale b_j = W/eps, W = sum_j (r_j - l_j)
(L2: sqrt(sum_j (r_j - l_j)^2)/eps), or with ``eps_split=(e_1, .., e_d)`` (composition,
sum e_j = eps) b_j = (r_j - l_j)/e_j.  The L1 release is the split e_j = eps w_j / W.

* :func:`dpbook.multivariate.mvnormal.mvn_score`: grad_theta log N(x; mu, Sigma), any d;
* :func:`fisher_mc`: eq. (8) with Algorithm 4, any d;
* :func:`fisher_quad`: a deterministic reference for d = 2;
* :func:`box_score`, :func:`best_box`, :func:`best_split`: Section 5's sc(.) and eq. (13).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import optimize, special

from dpbook.model.mechanisms import check_mechanism, clip
from dpbook.multivariate.mvnormal import (
    MultivariateNormal,
    correlation,
    mvn_score,
    params_dim,
)
from dpbook.multivariate.release import box_scale, check_box
from dpbook.validation import (
    as_generator,
    check_eps,
    check_finite,
    check_mc_size,
    check_positive,
)

MECHANISMS = ("laplace", "gaussian")  # the noise densities the quadrature writes out
SCORES = MultivariateNormal.SCORES
MIN_HALF_WIDTH = 1e-4  # the search's smallest half-width (standard units)


# ------------------------------------------------------------------ checks and pieces
def check_theta(theta, d=None):
    """theta as a float array (..., 2d + d(d-1)/2); ValueError for sigma <= 0 or a
    correlation matrix that is not positive definite (|rho| >= 1 for d = 2)."""
    th = check_finite("theta", theta)
    if th.ndim == 0:
        raise ValueError("theta must be a vector (mu, sigma, rho)")
    dd = params_dim(th.shape[-1])
    if d is not None and dd != d:
        raise ValueError(f"theta has the length of d = {dd}, the box has d = {d}")
    if np.any(th[..., dd:2 * dd] <= 0):
        raise ValueError("theta's sigma_j must be positive")
    rho = th[..., 2 * dd:]
    if np.any(np.abs(rho) >= 1) or (dd > 2 and np.any(
            np.linalg.eigvalsh(correlation(rho, dd))[..., 0] <= 0)):
        raise ValueError("theta's correlations must give a positive definite matrix "
                         "(|rho| < 1)")
    return th


def _check_mechanism(mechanism):
    mechanism = check_mechanism(mechanism)
    if mechanism not in MECHANISMS:
        raise ValueError(f"the box release's information is written for the mechanisms "
                         f"{', '.join(MECHANISMS)}, not {mechanism!r}")
    return mechanism


def _scales(l, r, eps, mechanism="laplace", eps_split=None):
    """The noise scales b_j: W/eps (L1, Laplace), the L2 width over eps (Gaussian), or
    (r_j - l_j)/e_j for a split (composition of d one-dimensional releases)."""
    w = r - l
    if eps_split is None:
        return np.full(w.shape, box_scale(l, r, eps, mechanism))
    e = np.array([check_positive("eps_split's entries", v) for v in np.atleast_1d(eps_split)])
    if e.shape != w.shape or not np.isclose(e.sum(), eps, rtol=1e-12, atol=0):
        raise ValueError(f"eps_split must be {w.size} positive numbers summing to eps = "
                         f"{eps!r}, got {eps_split!r}")
    return w / e


_clip = clip  # a name of this module's own (a negative control replaces it)


def _setup(theta, l, r, eps, mechanism, eps_split):
    l, r = check_box(l, r)
    th = check_theta(theta, l.size)
    if th.ndim != 1:
        raise ValueError("theta must be one parameter vector")
    eps = check_eps(eps)
    b = _scales(l, r, eps, _check_mechanism(mechanism), eps_split)
    return th, l, r, eps, b


# ------------------------------------------------------------------ Monte Carlo
def fisher_mc(theta, l, r, eps, rng, M=2000, K=10000, mechanism="laplace",
              eps_split=None):
    """(F, se): eq. (8) with Algorithm 4's scores for a box release.

    y_m ~ p(y | theta) (M draws); each score is Algorithm 4's self-normalised importance
    sampling of Fisher's identity with K draws x_i ~ P_theta, weights
    prod_j g_{b_j}(y_mj - clip(x_ij)), and F = (1/M) sum_m s_m s_m^T.  As the 1-D
    default (``dpbook.fisher.mc``, share_samples=True) the K draws are shared by the M
    y's (common random numbers: each score keeps Algorithm 4's distribution).  ``se``:
    elementwise, the spread of the M outer products plus, by the delta method, the
    error of the shared K draws (as ``dpbook.fisher.mc``); the O(1/K) upward bias
    E[Var(s_hat | y)] of eq. (8) is not in it.  Draws: M latent, M noise, then K
    importance draws, from ``rng`` in that order.
    """
    th, l, r, eps, b = _setup(theta, l, r, eps, mechanism, eps_split)
    M, K = check_mc_size("M", M), check_mc_size("K", K)
    rng = as_generator(rng)
    d = l.size
    model = MultivariateNormal(d)
    x = model.sample(rng, *th, size=M)
    v = rng.laplace(size=(M, d)) if mechanism == "laplace" else rng.standard_normal((M, d))
    y = _clip(x, l, r) + b * v
    xs = model.sample(rng, *th, size=K)
    g = mvn_score(xs, th)  # (K, P)
    c = _clip(xs, l, r) / b
    P = g.shape[1]
    s = np.empty((M, P))
    A = np.zeros((K, P))  # sum_m omega_mi s_m
    B = np.zeros((K, P * P))  # sum_m omega_mi s_m s_m^T
    step = max(1, 2_000_000 // K)
    for i0 in range(0, M, step):
        yb = y[i0:i0 + step] / b
        diff = yb[:, None, :] - c[None, :, :]
        lw = -(np.abs(diff) if mechanism == "laplace" else 0.5 * diff * diff).sum(-1)
        w = np.exp(lw - lw.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        sb = w @ g
        s[i0:i0 + step] = sb
        A += w.T @ sb
        B += w.T @ (sb[:, :, None] * sb[:, None, :]).reshape(-1, P * P)
    outer = s[:, :, None] * s[:, None, :]
    F = outer.mean(0)
    # influence of sample i on F: (K/M) sum_m omega_mi (s_m d^T + d s_m^T), d = g_i - s_m
    H = (K / M) * (A[:, :, None] * g[:, None, :] + g[:, :, None] * A[:, None, :]
                   - 2.0 * B.reshape(K, P, P))
    se = np.sqrt(outer.var(0, ddof=1) / M + H.var(0, ddof=1) / K)
    return F, se


# ------------------------------------------------------------------ quadrature (d = 2)
def _log_ndtr_diff(a, c):
    """log(Phi(a) - Phi(c)) for a >= c, in the tail where it is small."""
    flip = c > 0
    hi, lo = np.where(flip, -c, a), np.where(flip, -a, c)
    la = special.log_ndtr(hi)
    with np.errstate(divide="ignore"):
        return la + np.log(-np.expm1(special.log_ndtr(lo) - la))


def _clipped_density(y, m, tau, l, r, b, mechanism):
    """Density at y of clip(N(m, tau^2), l, r) + b V: atoms at l, r and the normal on
    (l, r), each convolved with the noise in closed form (y in [l, r] for Laplace)."""
    al, be = (l - m) / tau, (r - m) / tau
    if mechanism == "laplace":
        k = tau / b
        t = (y - m) / tau
        with np.errstate(over="ignore", invalid="ignore"):
            i1 = np.exp((m - y) / b + 0.5 * k * k + _log_ndtr_diff(t - k, al - k))
            i2 = np.exp((y - m) / b + 0.5 * k * k + _log_ndtr_diff(be + k, t + k))
        atoms = special.ndtr(al) * np.exp(-(y - l) / b) + special.ndtr(-be) * np.exp(-(r - y) / b)
        return (atoms + np.nan_to_num(i1) + np.nan_to_num(i2)) / (2 * b)
    s2 = tau * tau + b * b
    cm, sd = (m * b * b + y * tau * tau) / s2, tau * b / np.sqrt(s2)
    inner = np.exp(-0.5 * (y - m) ** 2 / s2 + _log_ndtr_diff((r - cm) / sd, (l - cm) / sd))
    atoms = special.ndtr(al) * np.exp(-0.5 * ((y - l) / b) ** 2) \
        + special.ndtr(-be) * np.exp(-0.5 * ((y - r) / b) ** 2)
    return inner / np.sqrt(2 * np.pi * s2) + atoms / (np.sqrt(2 * np.pi) * b)


def _noise(u, b, mechanism):
    if mechanism == "laplace":
        return np.exp(-np.abs(u) / b) / (2 * b)
    return np.exp(-0.5 * (u / b) ** 2) / (np.sqrt(2 * np.pi) * b)


@functools.lru_cache(maxsize=16)
def _leggauss(n):
    return np.polynomial.legendre.leggauss(n)


def _gl(lo, hi, n):
    """Gauss-Legendre nodes and weights on [lo, hi] (broadcast over lo, hi)."""
    t, w = _leggauss(n)
    lo, hi = np.asarray(lo, float)[..., None], np.asarray(hi, float)[..., None]
    return lo + (hi - lo) * (t + 1) / 2, (hi - lo) * w / 2


def _y_rule(l, r, b, n, mechanism):
    """1-D rule for E over y_j.  Laplace: for y_j >= r_j the density is exactly
    exp(-(y_j - r_j)/b_j) times its value at r_j and the score is constant, so the tail
    is a node at r_j of weight b_j (likewise at l_j).  Gaussian: nodes to 12 b_j out."""
    if mechanism == "laplace":
        y, w = _gl(l, r, n)
        return np.r_[l, y, r], np.r_[b, w, b]
    parts = [_gl(l - 12 * b, l, n // 2), _gl(l, r, n), _gl(r, r + 12 * b, n // 2)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _gl_between(ends, n):
    """Gauss-Legendre, ``n`` nodes on each interval between consecutive ``ends`` (sorted
    along the last axis): nodes and weights (..., (m - 1) n)."""
    parts = [_gl(ends[..., j], ends[..., j + 1], n) for j in range(ends.shape[-1] - 1)]
    return np.concatenate([q[0] for q in parts], -1), np.concatenate([q[1] for q in parts], -1)


def _density(th, l, r, b, y1, y2, n, mechanism):
    """p(y1_i, y2_j | theta) on a grid: the x2-integral of
    phi(x2) g_b2(y2 - clip(x2)) h(y1 | x2), h the density of clip(X1) + b1 V1 given X2
    (:func:`_clipped_density`).  Below l2 and above r2 g_b2 is constant; the x2 axis is
    split where the integrand has a kink or a step: at l2, r2, y2 (g_b2's kink), mu2,
    and for |rho| >= 0.9 where E[X1 | x2] = l1, r1, y1 (smoothed only over
    tau = sigma1 sqrt(1 - rho^2)).  Beyond the outermost split the normal tail is
    integrated in u = Phi(z2), graded as u = U v^3 (x2 -> -inf is a singular end in u).
    """
    mu1, mu2, s1, s2, rho = th
    tau = s1 * np.sqrt(1 - rho * rho)
    n1 = y1.size

    def phi2(x):
        return np.exp(-0.5 * ((x - mu2) / s2) ** 2) / (np.sqrt(2 * np.pi) * s2)

    def h(x2, y):  # y broadcast against x2
        return _clipped_density(y, mu1 + rho * s1 * (x2 - mu2) / s2, tau, l[0], r[0], b[0],
                                mechanism)

    # splits where E[X1 | x2] = l1, r1, y1 (within 10 sigma2) when |rho| >= 0.9: h's
    # features are tau s2 / (|rho| s1) <= 0.48 s2 wide there (unsplit, the rule is good
    # to 1e-9 at rho = 0.99 but not 0.999); below, no split (it would run off to
    # infinity as rho -> 0)
    steep = abs(rho) >= 0.9
    at = np.clip(mu2 + (np.r_[l[0], r[0]][None, :] - mu1) * s2 / (rho * s1), mu2 - 10 * s2,
                 mu2 + 10 * s2) if steep else np.empty((1, 0))
    ky = np.clip(mu2 + (y1[:, None] - mu1) * s2 / (rho * s1), mu2 - 10 * s2,
                 mu2 + 10 * s2) if steep else np.empty((n1, 0))
    inner = np.column_stack([np.broadcast_to(at, (n1, at.shape[1])), ky])
    splits = np.column_stack([np.full(n1, mu2), inner])
    v, wv = _gl(0.0, 1.0, n)
    a = []
    for end, side in ((l[1], -1.0), (r[1], 1.0)):
        # beyond ``end``: the splits on that side; the outermost (the mean among them)
        # starts the tail in u
        clipped = np.minimum(splits, end) if side < 0 else np.maximum(splits, end)
        e = np.sort(np.column_stack([clipped, np.full(n1, end)]), 1)
        far = e[:, 0] if side < 0 else e[:, -1]
        U = special.ndtr(-side * (far - mu2) / s2)[:, None]  # <= 1/2: far is past mu2
        xu = mu2 - side * s2 * special.ndtri(U * v ** 3)
        out = (h(xu, y1[:, None]) * (U * 3 * v * v * wv)).sum(-1)
        x, w = _gl_between(e, n)
        a.append(out + (h(x, y1[:, None]) * w * phi2(x)).sum(-1))
    # inside [l2, r2]: per (y1, y2)
    c = np.broadcast_to(y2, (n1, y2.size))
    m = inner.shape[1]
    e = np.sort(np.clip(np.concatenate(
        [np.broadcast_to(inner[:, None, :], (n1, y2.size, m)), c[..., None],
         np.full((n1, y2.size, 2), [l[1], r[1]])], -1), l[1], r[1]), -1)
    x2, wx = _gl_between(e, n)  # (n1, n2, (m + 2) n)
    wx = wx * phi2(x2) * _noise(y2[:, None] - x2, b[1], mechanism)
    mid = (h(x2, y1[:, None, None]) * wx).sum(-1)
    return (a[0][:, None] * _noise(y2 - l[1], b[1], mechanism)
            + a[1][:, None] * _noise(y2 - r[1], b[1], mechanism) + mid)


def _quad_block(th, l, r, b, mechanism, n, idx):
    """E[s_idx s_idx^T] over the y rule, s by central differences of log p in theta."""
    y1, w1 = _y_rule(l[0], r[0], b[0], n, mechanism)
    y2, w2 = _y_rule(l[1], r[1], b[1], n, mechanism)
    p = _density(th, l, r, b, y1, y2, n, mechanism)
    ok = p > 1e-300  # nodes where p underflows carry no weight
    scores = []
    for k in idx:
        # steps on the scale of each coordinate (1 - |rho|: tau = sigma1 sqrt(1 - rho^2))
        h = 1e-5 * (th[2 + k % 2] if k < 4 else 1 - abs(th[4]))
        up, dn = th.copy(), th.copy()
        up[k] += h
        dn[k] -= h
        pu = _density(up, l, r, b, y1, y2, n, mechanism)
        pd = _density(dn, l, r, b, y1, y2, n, mechanism)
        with np.errstate(divide="ignore", invalid="ignore"):
            scores.append(np.where(ok, (np.log(pu) - np.log(pd)) / (2 * h), 0.0))
    S = np.stack(scores, -1)
    wp = w1[:, None] * w2[None, :] * p
    return np.einsum("ij,ija,ijb->ab", wp, S, S), float(wp.sum())


def fisher_quad(theta, l, r, eps, mechanism="laplace", eps_split=None, n=48,
                return_mass=False):
    """F_{l,r}^eps(theta) of eq. (7) for d = 2 by deterministic quadrature.

    clip(X) is a mixture of a density on the box, four edge densities and four corner
    atoms; p(y | theta) is that mixture convolved with the product noise, computed by a
    closed form in x1 given x2 and Gauss-Legendre (``n`` nodes a piece) in x2 and in y,
    the score grad log p by central differences in theta (step 1e-5 sigma, 1e-5 (1 -
    |rho|)).  With ``return_mass`` also the integral of p (1 up to quadrature error).
    Measured against n = 128: at n = 48, entries within 1e-6 of sqrt(F_ii F_jj) (boxes
    0.1 to 20 sigma wide, eps 0.2 to 200, |rho| <= 0.99), else within 1e-9 of the
    largest entry (a box 5 sigma off, a width of 2e-4: the differences' rounding, for
    parameters the release says almost nothing about); F_rhorho within 1.4e-4 at
    rho = 0.9999.  ~0.5 s.
    """
    th, l, r, eps, b = _setup(theta, l, r, eps, mechanism, eps_split)
    if l.size != 2:
        raise ValueError("fisher_quad is written for d = 2")
    F, mass = _quad_block(th, l, r, b, mechanism, n, range(5))
    return (F, mass) if return_mass else F


# ------------------------------------------------------------------ scores and search
def box_score(F, kind="trace-mu"):
    """Section 5's overall score sc(.) of an information matrix (multidimensional
    theta): 'trace-mu' = F[0,0] + F[1,1] (the locations), 'trace' = trace F,
    'logdet' = log det F (D-optimality).  Only 'trace-mu' and 'logdet' keep their order
    under a common rescaling of theta (Theorem 3): 'trace' adds the unscaled rho entry."""
    F = np.asarray(F, float)
    if kind == "trace-mu":
        return float(F[0, 0] + F[1, 1])
    if kind == "trace":
        return float(np.trace(F))
    if kind == "logdet":
        sign, val = np.linalg.slogdet(F)
        return float(val) if sign > 0 else -np.inf
    raise ValueError(f"unknown score {kind!r}; choose one of {', '.join(SCORES)}")


def _sc(th, l, r, b, score, mechanism, n):
    """sc(F) from the quadrature, computing only the scores the criterion needs."""
    idx = range(2) if score == "trace-mu" else range(5)
    F, _ = _quad_block(th, l, r, b, mechanism, n, idx)
    return box_score(F if score != "trace-mu" else np.pad(F, (0, 3)), score)


def _best_1d(eps, score):
    """The best symmetric interval [-c, c] of the 1-D release at eps (start values)."""
    from dpbook.likelihood.fisher_quadrature import fisher_exact

    def neg(logc):
        F = fisher_exact(-np.exp(logc), np.exp(logc), eps, theta=(0.0, 1.0))
        return -{"trace-mu": F[0, 0], "trace": np.trace(F),
                 "logdet": np.linalg.slogdet(F)[1]}[score]
    return float(np.exp(optimize.minimize_scalar(neg, bounds=(-5, 2.5),
                                                 method="bounded").x))


def best_box(eps, score="trace-mu", rho=0.0, ratio=1.0, mechanism="laplace",
             eps_split=None, symmetric=True, n=16):
    """(a, b): the standard box maximising sc(F) (eq. 13) at mu = 0, sigma = (1, ratio),
    correlation rho; for a drawn theta use l_j = mu_j + a_j sigma_j, r_j = mu_j + b_j
    sigma_j (eq. 11 per component).

    Theorem 3 in 2-D: a shift of mu and a common scale c of both sigmas are exact
    symmetries of the release (W/eps scales with the box): F transforms with the
    Jacobian, F(theta') = D F(theta) D, D = diag(1/c on mu and sigma, 1 on rho), so the
    order of 'trace-mu' and 'logdet' is the same for every (mu, c).  A per-component
    scale is not a symmetry of the L1 release (W couples the widths); it is for a fixed
    ``eps_split`` (then b_j = (r_j - l_j)/e_j scales with its component, and the order
    of 'logdet' is the same for every sigma; 'trace-mu' weighs F_mu_j as 1/sigma_j^2).
    The box also depends on rho.  Hence the arguments rho and ratio.  Measured
    (logdet, quadrature): the standard box moved per component to sigma2/sigma1 = 3
    loses 1.34 (eps = 1) and 1.26 (eps = 5) in log det F against the L1 box searched
    there (det ratio 3.8, 3.5); at rho = 0.5 it loses 0.003.  The same moved box with
    the fixed split (eps/2, eps/2) beats that searched L1 box by 0.69 and 0.78.

    Search: bounded Nelder-Mead on the log half-widths (``symmetric``: a = -b, the form
    of the optimum by the symmetry x -> -x of N(0, Sigma)) or on (centre, log half-width)
    per component, half-widths in [MIN_HALF_WIDTH, 20]; sc(F) by the quadrature of
    :func:`fisher_quad` with ``n`` nodes (deterministic).  Starts: the square box at
    the 1-D optimum for eps/2 (exact for rho = 0, ratio = 1 among square boxes) and the
    two lopsided boxes that give one component the 1-D optimum at eps and the other
    the smallest width: the sum 'trace-mu' is convex in the budget shares when eps is
    small (the 1-D F_mumu grows as eps^2), so its optimum can be such a corner.  A
    half-width at MIN_HALF_WIDTH means: release that component as (almost) pure noise.
    """
    eps = check_eps(eps)
    _check_mechanism(mechanism)
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {', '.join(SCORES)}")
    th = check_theta([0.0, 0.0, 1.0, check_positive("ratio", ratio), rho], 2)
    sd = th[2:4]
    lo, hi = np.log(MIN_HALF_WIDTH), np.log(20.0)

    def box(p):
        cen, hw = (0.0, np.exp(p)) if symmetric else (p[:2], np.exp(p[2:]))
        return (cen - hw) * sd, (cen + hw) * sd

    def neg(p):
        l, r = box(p)
        return -_sc(th, l, r, _scales(l, r, eps, mechanism, eps_split), score, mechanism, n)

    c_half, c_full = np.log(_best_1d(eps / 2, score)), np.log(_best_1d(eps, score))
    starts = [[c_half, c_half], [c_full, lo + 1], [lo + 1, c_full]]
    bounds = [(lo, hi)] * 2 if symmetric else [(-5, 5)] * 2 + [(lo, hi)] * 2
    best = None
    for st in starts:
        st = st if symmetric else [0.0, 0.0] + st
        res = optimize.minimize(neg, st, method="Nelder-Mead", bounds=bounds,
                                options={"xatol": 1e-2, "fatol": 1e-8, "maxfev": 600})
        if best is None or res.fun < best.fun:
            best = res
    l, r = box(best.x)
    return l / sd, r / sd


def best_split(l, r, theta, eps, score="trace-mu", n=16):
    """(e1, sc at e1, sc of the L1 release): the split (e1, eps - e1) of a box's budget
    between its components that maximises sc(F) (composition, Laplace noise:
    b_j = (r_j - l_j)/e_j), against the L1 release, which is the split e_j = eps w_j / W.

    sc can peak at a corner (see :func:`best_box`), so a grid of shares e1/eps in
    [1e-4, 1 - 1e-4] (and the L1 share) first, then Brent's method between the best
    point's neighbours."""
    th, l, r, eps, b = _setup(theta, l, r, eps, "laplace", None)
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {', '.join(SCORES)}")

    def neg(f):
        e = np.array([f, 1 - f]) * eps
        return -_sc(th, l, r, (r - l) / e, score, "laplace", n)

    f_l1 = (r[0] - l[0]) / (r - l).sum()
    grid = np.unique(np.r_[special.expit(np.linspace(-9.2, 9.2, 33)), f_l1])
    vals = np.array([neg(f) for f in grid])
    k = int(np.argmin(vals))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    res = optimize.minimize_scalar(neg, bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-6})
    f, v = (res.x, res.fun) if res.fun < vals[k] else (grid[k], vals[k])
    return float(f * eps), float(-v), float(-vals[grid == f_l1][0])
