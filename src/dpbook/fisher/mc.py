"""Monte Carlo Fisher information of one release, eq. (8) with Algorithm 4, any family.

Paper, Section 5.1 and Appendix C.  F_{l,r}^eps(theta) of eq. (7) is estimated by eq. (8),
F ~ (1/M) sum_j s_j s_j^T, with y_j ~ p(y | theta) and each score s_j by Algorithm 4
(self-normalised importance sampling of Fisher's identity): K draws x_i ~ P_theta,
weights = the mechanism's density of y_j - T_l^r(x_i) at scale (r - l)/eps, and
s_j = sum_i w_i grad log p_theta(x_i) / sum_i w_i.

:func:`fisher_mc` is the public entry point for every family and mechanism; for the
normal family with the Laplace mechanism it runs the compiled backend
(:mod:`dpbook.fisher.normal_mc`, chosen by :mod:`dpbook.backends`).  The generic code
below feeds the family's samples and scores either to that backend's O(K + M log K)
sorted-prefix-sum kernel (Laplace mechanism, d <= 2: path 'sorted') or to a direct
O(M K) summation (any mechanism and d: path 'dense').
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from dpbook.backends import backend
from dpbook.fisher.estimates import FisherEstimate
from dpbook.fisher.normal_mc import count_le, run_cells, sorted_cell
from dpbook.model.families import as_family
from dpbook.model.mechanisms import GaussianMechanism, LaplaceMechanism, get_mechanism
from dpbook.validation import (
    as_generator,
    check_eps,
    check_interval,
    check_mc_size,
    check_memory,
)

PATHS = ("auto", "sorted", "dense")
_ROWS_PER_CHUNK = 1 << 20  # elements per block in the fresh-samples path
_DENSE_BLOCK = 1 << 15  # elements of one (rows x nodes) weight block: stays in cache


def check_path(path):
    if path not in PATHS:
        raise ValueError(f"unknown path {path!r}; choose one of {', '.join(PATHS)}")
    return path


def _family_theta(family, theta):
    """theta as a tuple of floats; None -> (0, 1) for a location-scale family (its base
    distribution, Theorem 3), else family.default_theta()."""
    if theta is None:
        theta = (0.0, 1.0) if family.location_scale else family.default_theta()
    if np.ndim(theta) == 0:
        theta = (theta,)
    return family.check_theta(*np.asarray(theta, dtype=object).ravel())


def mc_setup(family, mechanism, theta):
    """(Family, Mechanism, theta as a checked tuple) of the arguments."""
    fam = as_family(family)
    return fam, get_mechanism(mechanism), _family_theta(fam, theta)


def _family_scores(family, x, theta):
    """grad_theta log p_theta(x) stacked on a last axis: (..., d) float array."""
    g = family.score(x, *theta)
    return np.stack([np.broadcast_to(np.asarray(c, float), np.shape(x)) for c in g], axis=-1)


def _draw_family_base(rng, family, mech, theta, M):
    """The y-draws of eq. (8): M x's from P_theta, then M standard noises (fixed order)."""
    xy = np.asarray(family.sample(rng, *theta, size=M), dtype=float)
    v = np.asarray(mech.sample(rng, size=M), dtype=float)
    return xy, v


def _sorted_family_samples(x, family, theta):
    """Importance samples sorted ascending, (K,), with their scores, (K, d)."""
    xs = np.sort(np.asarray(x, dtype=float), kind="stable")
    return xs, np.ascontiguousarray(_family_scores(family, xs, theta))


def _prefix_sums(xs, gs):
    """(xs, gs, pre, suf) for the sorted kernel _cell from any two score rows gs (2, K)
    (the generic form of _shared_samples: sums of g1, g2, g1^2, g1 g2, g2^2)."""
    g1, g2 = gs
    terms = np.stack([g1, g2, g1 * g1, g1 * g2, g2 * g2])
    zero = np.zeros((5, 1))
    pre = np.concatenate([zero, np.cumsum(terms, axis=1)], axis=1)
    suf = np.concatenate([zero, np.cumsum(terms[:, ::-1], axis=1)], axis=1)
    return xs, np.ascontiguousarray(terms[:2]), pre, suf


def _sorted_shared(xs, gs):
    """Inputs of _cell for d <= 2 (a zero second score component when d = 1)."""
    g = np.zeros((2, xs.size))
    g[: gs.shape[1]] = gs.T
    return _prefix_sums(xs, g)


def _unpack_cell(res, d):
    """_cell's 11 numbers -> (F, se, se_trace, se_outer, se_outer_trace) for d = 1, 2."""
    res = np.asarray(res, dtype=float)
    if d == 1:
        one = lambda q: res[q].reshape(1, 1)  # noqa: E731
        return one(0), one(7), float(res[7]), one(3), float(res[3])
    sym = lambda a, b, c: np.array([[a, b], [b, c]])  # noqa: E731
    return (sym(*res[:3]), sym(*res[7:10]), float(res[10]), sym(*res[3:6]), float(res[6]))


def _outer_moments(s):
    """F = mean_j s_j s_j^T, and the se of that mean elementwise and of the trace."""
    M, d = s.shape
    prods = s[:, :, None] * s[:, None, :]
    tr = np.einsum("mii->m", prods)
    F = prods.mean(axis=0)
    if M > 1:
        se = prods.std(axis=0, ddof=1) / math.sqrt(M)
        se_tr = float(tr.std(ddof=1) / math.sqrt(M))
    else:
        se, se_tr = np.full((d, d), np.nan), float("nan")
    return F, se, se_tr


@njit(nogil=True, cache=True)
def _logk_block(y, p, b, gaussian, U):
    """U[j, i] = log k(y_j - p_i) - max_i log k(y_j - p_i) for the Laplace (gaussian =
    False) or Gaussian noise density k at scale b; the max is at the node nearest y_j
    (p ascending; both densities decrease in |v|), so U <= 0 with a 0 in every row."""
    rows = y.shape[0]
    n = p.shape[0]
    invb = 1.0 / b
    inv2 = 0.5 / (b * b)
    for j in range(rows):
        yj = y[j]
        k = count_le(p, n, yj)
        dmin = math.inf
        if k > 0:
            dmin = yj - p[k - 1]
        if k < n:
            dmin = min(dmin, p[k] - yj)
        if gaussian:
            mx = dmin * dmin * inv2
            for i in range(n):
                u = yj - p[i]
                U[j, i] = mx - u * u * inv2
        else:
            mx = dmin * invb
            for i in range(n):
                U[j, i] = mx - abs(yj - p[i]) * invb


@njit(nogil=True, cache=True)
def _dot4(a, b, n):
    """sum_i a[i] b[i] with four interleaved accumulators (a fixed order: deterministic)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    m = n - n % 4
    for i in range(0, m, 4):
        s0 += a[i] * b[i]
        s1 += a[i + 1] * b[i + 1]
        s2 += a[i + 2] * b[i + 2]
        s3 += a[i + 3] * b[i + 3]
    for i in range(m, n):
        s0 += a[i] * b[i]
    return (s0 + s1) + (s2 + s3)


@njit(nogil=True, cache=True)
def _sums3(u, g0, g1, g2, n):
    """(sum u g0, sum u g1, sum u g2), one pass, two interleaved accumulators each (a
    fixed order: deterministic)."""
    a0 = 0.0
    a1 = 0.0
    b0 = 0.0
    b1 = 0.0
    c0 = 0.0
    c1 = 0.0
    m = n - n % 2
    for i in range(0, m, 2):
        u0 = u[i]
        u1 = u[i + 1]
        a0 += u0 * g0[i]
        a1 += u1 * g0[i + 1]
        b0 += u0 * g1[i]
        b1 += u1 * g1[i + 1]
        c0 += u0 * g2[i]
        c1 += u1 * g2[i + 1]
    if m < n:
        a0 += u[m] * g0[m]
        b0 += u[m] * g1[m]
        c0 += u[m] * g2[m]
    return a0 + a1, b0 + b1, c0 + c1


@njit(nogil=True, cache=True)
def _block_reduce(U, NG, pa, pb, s, T):
    """Algorithm 4 for a block of y's given their node weights U (rows, n): the scores
    s_j = sum_i U_ji G_i / sum_i U_ji cnt_i into s (rows, d), and the influence sums
    T[q, i] += U_ji coef_q(j) / W_j, coef = (s_a, s_a s_b for the pairs pa, pb).
    NG = (count, G_1..G_d) per node, padded with zero rows to at least 3 rows."""
    rows, n = U.shape
    d = s.shape[1]
    npair = pa.shape[0]
    S = np.zeros(NG.shape[0])
    coef = np.empty(d + npair)
    for j in range(rows):
        u = U[j]
        if d <= 2:
            W, S1, S2 = _sums3(u, NG[0], NG[1], NG[2], n)
            s[j, 0] = S1 / W
            if d == 2:
                s[j, 1] = S2 / W
        else:
            for q in range(d + 1):
                S[q] = _dot4(u, NG[q], n)
            W = S[0]
            for a in range(d):
                s[j, a] = S[a + 1] / W
        for a in range(d):
            coef[a] = s[j, a] / W
        for k in range(npair):
            coef[d + k] = s[j, pa[k]] * s[j, pb[k]] / W
        for q in range(d + npair):
            c = coef[q]
            t = T[q]
            for i in range(n):
                t[i] += u[i] * c


def _node_logk(mech, y, p, b, U):
    """U = log weights of the nodes for the y block, minus each row's max."""

    if type(mech) in (LaplaceMechanism, GaussianMechanism):
        _logk_block(y, p, b, type(mech) is GaussianMechanism, U)
    else:  # any other Mechanism: its log density, numpy
        U[...] = mech.logpdf(y[:, None] - p[None, :], b)
        U -= U.max(axis=1, keepdims=True)


def _dense_shared_cell(l, r, eps, mech, xy, v, xs, gs):
    """Algorithm 4 for M y's sharing the K sorted samples, by direct summation (any
    mechanism, any d), O(M K).  Samples with the same clipped value (the lumps at l and
    r, ties of a discrete family) are merged into one node with their count and score
    sum, which only changes the order of summation.  Weights in blocks of rows: log
    weights (compiled for the shipped mechanisms), numpy's vectorised exp, then compiled
    fixed-order sums.  Returns (F, se, se_trace, se_outer, se_outer_trace), se the
    delta-method total of the module docstring."""
    K, d = gs.shape
    M = xy.size
    b = (r - l) / eps
    c = np.clip(xs, l, r)
    starts = np.flatnonzero(np.concatenate([[True], c[1:] != c[:-1]]))
    p = np.ascontiguousarray(c[starts])
    n = p.size
    counts = np.diff(np.append(starts, K))
    NG = np.zeros((max(3, d + 1), n))
    NG[0] = counts
    NG[1 : d + 1] = np.add.reduceat(gs, starts, axis=0).T
    ia, ib = np.triu_indices(d)
    y = np.clip(xy, l, r) + b * v
    s = np.empty((M, d))
    T = np.zeros((d + ia.size, n))  # sum_j om_ij (s_j, s_ja s_jb): the influence terms
    rows = max(1, _DENSE_BLOCK // n)
    U = np.empty((min(rows, M), n))
    for lo in range(0, M, rows):
        hi = min(M, lo + rows)
        Ub = U[: hi - lo]
        _node_logk(mech, y[lo:hi], p, b, Ub)
        np.exp(Ub, out=Ub)
        _block_reduce(Ub, NG, ia, ib, s[lo:hi], T)
    F, se_o, se_o_tr = _outer_moments(s)
    # H_ab(x_i) = (K/M) [T1_a g_ib + g_ia T1_b - 2 T2_ab] at the node of sample i
    node = np.repeat(np.arange(n), counts)
    T1 = T[:d, node].T
    H = (K / M) * (T1[:, ia] * gs[:, ib] + gs[:, ia] * T1[:, ib] - 2.0 * T[d:, node].T)
    H = np.concatenate([H, H[:, ia == ib].sum(axis=1, keepdims=True)], axis=1)
    vh = H.var(axis=0, ddof=1) / K if K > 1 else np.full(H.shape[1], np.nan)
    se_tr = float(math.sqrt(se_o_tr**2 + vh[-1]))
    se = np.empty((d, d))
    se[ia, ib] = np.sqrt(se_o[ia, ib] ** 2 + vh[:-1])
    se[ib, ia] = se[ia, ib]
    return F, se, se_tr, se_o, se_o_tr


def _dense_fresh_scores(rng, l, r, eps, mech, family, theta, xy, v, K):
    """Literal Algorithm 4: fresh K samples from P_theta for every y_j, drawn row by row
    in blocks of _ROWS_PER_CHUNK // K rows."""
    M = xy.size
    b = (r - l) / eps
    y = np.clip(xy, l, r) + b * v
    s = np.empty((M, len(theta)))
    rows = max(1, _ROWS_PER_CHUNK // K)
    for lo in range(0, M, rows):
        hi = min(M, lo + rows)
        x = np.asarray(family.sample(rng, *theta, size=(hi - lo, K)), dtype=float)
        lw = mech.logpdf(y[lo:hi, None] - np.clip(x, l, r), b)
        w = np.exp(lw - lw.max(axis=1, keepdims=True))
        g = _family_scores(family, x, theta)
        s[lo:hi] = np.einsum("mk,mkd->md", w, g) / w.sum(axis=1)[:, None]
    return s


def _resolve_path(path, mech, d):
    """'sorted' needs the Laplace mechanism (the factorising weights) and d <= 2."""
    ok = mech.name == "laplace" and d <= 2
    if path == "sorted" and not ok:
        raise ValueError("path 'sorted' needs the Laplace mechanism and at most 2 parameters")
    if path == "auto":
        return "sorted" if ok else "dense"
    return path


def _shared_cell(l, r, eps, mech, xy, v, xs, gs, path, sorted_inputs=None):
    """One interval with shared samples: (F, se, se_trace, se_outer, se_outer_trace)."""
    if path == "sorted":
        if sorted_inputs is None:
            sorted_inputs = _sorted_shared(xs, gs)
        res = sorted_cell(l, r, eps, 0.0, 1.0, xy, v, *sorted_inputs)
        return _unpack_cell(res, gs.shape[1])
    return _dense_shared_cell(l, r, eps, mech, xy, v, xs, gs)


def _fisher_mc_generic(l, r, eps, theta=None, family=None, mechanism="laplace", M=1000,
                     K=10000, rng=None, share_samples=True, path="auto"):
    """Monte Carlo Fisher information, eq. (8) with Algorithm 4 scores, for any family.

    X ~ P_theta (``family``: a Family object or name, default the normal), Y =
    T_l^r(X) + ((r - l)/eps) V with V the standard noise of ``mechanism`` ('laplace',
    'gaussian' or a Mechanism).  M observations y_j ~ p(y|theta); each score by
    Algorithm 4: K samples x_i ~ P_theta (family.sample), weights = the mechanism's
    density of y_j - T_l^r(x_i) at scale (r - l)/eps, gradients family.score(x_i).
    theta: a tuple (a scalar for one parameter); None -> (0, 1) for a location-scale
    family (the base distribution of eq. 13), else family.default_theta().

    share_samples=True: the K samples are shared by the M y's (common random numbers,
    as fisher_mc).  path='auto' picks 'sorted' (the O(K + M log K) kernel of fisher_mc,
    fed with the family's samples and scores) for the Laplace mechanism and d <= 2, and
    'dense' (direct O(M K) summation, any mechanism and d) otherwise; both give the same
    numbers up to rounding, and se is the delta-method total of the module docstring.
    share_samples=False: the literal Algorithm 4 (fresh samples per y, O(M K), dense;
    path is ignored), and se = se_outer.

    Random numbers, from one Generator (rng: Generator, int seed, SeedSequence or None)
    in this order: family.sample(size=M) (the x's behind the y's), mechanism.sample(M)
    (their noise), then family.sample(size=K) (or M x K, in blocks of rows, when
    share_samples=False).  The same seed gives bit-identical output.  For the normal
    family and the Laplace mechanism these are fisher_mc's draws (mu + sigma z), so the
    two agree to rounding.  Returns a FisherEstimate with F of shape (d, d).
    """
    eps = check_eps(eps)
    l, r = check_interval(l, r)
    if l.ndim or r.ndim:
        raise ValueError("fisher_mc takes scalar l and r; use fisher_grid for many "
                         "intervals")
    l, r = float(l), float(r)
    fam, mech, theta = mc_setup(family, mechanism, theta)
    M = check_mc_size("M", M)
    K = check_mc_size("K", K)
    path = _resolve_path(check_path(path), mech, fam.dim)
    rng = as_generator(rng)
    xy, v = _draw_family_base(rng, fam, mech, theta, M)
    if not share_samples:
        s = _dense_fresh_scores(rng, l, r, eps, mech, fam, theta, xy, v, K)
        F, se, se_tr = _outer_moments(s)
        return FisherEstimate(F=F, se=se, se_trace=se_tr, se_outer=se, se_outer_trace=se_tr)
    x = np.asarray(fam.sample(rng, *theta, size=K), dtype=float)
    xs, gs = _sorted_family_samples(x, fam, theta)
    F, se, se_tr, so, so_tr = _shared_cell(l, r, eps, mech, xy, v, xs, gs, path)
    return FisherEstimate(F=F, se=se, se_trace=se_tr, se_outer=so, se_outer_trace=so_tr)


def fisher_mc_pairs(A, B, eps, fam, mech, theta, M, K, seed, workers, path):
    """eq. (8) for the intervals (A[c], B[c]) on common random numbers (the draws of
    :func:`fisher_mc` from ``seed``, shared by every interval), ``workers`` threads:
    arrays (F, se, se_tr, se_o, se_o_tr) over c."""
    d = fam.dim
    path = _resolve_path(check_path(path), mech, d)
    rng = as_generator(seed, "seed")
    xy, v = _draw_family_base(rng, fam, mech, theta, M)
    xs, gs = _sorted_family_samples(fam.sample(rng, *theta, size=K), fam, theta)
    n = A.size
    F = np.empty((n, d, d))
    se = np.empty((n, d, d))
    so = np.empty((n, d, d))
    se_tr = np.empty(n)
    so_tr = np.empty(n)

    def store(c, res):
        F[c], se[c], se_tr[c], so[c], so_tr[c] = res

    if path == "sorted":
        out = run_cells(A, B, eps, 0.0, 1.0, xy, v, _sorted_shared(xs, gs), workers)
        for c in range(n):
            store(c, _unpack_cell(out[c], d))
        return F, se, se_tr, so, so_tr

    def run(lo, hi):
        for c in range(lo, hi):
            store(c, _shared_cell(A[c], B[c], eps, mech, xy, v, xs, gs, "dense"))

    bounds = [(lo, min(lo + 4, n)) for lo in range(0, n, 4)]
    if workers == 1 or len(bounds) <= 1:
        run(0, n)
    else:
        with ThreadPoolExecutor(max_workers=workers) as ex:
            for fu in [ex.submit(run, lo, hi) for lo, hi in bounds]:
                fu.result()
    return F, se, se_tr, so, so_tr


def fisher_mc_bytes(M, K, d=2) -> int:
    """Memory of one Monte Carlo estimate: the M draws of y with their scores and the K
    draws of x with their gradients (float64), with room for temporaries."""
    return 8 * 3 * (M + K) * (2 + d)


def fisher_mc(l, r, eps, theta=None, family=None, mechanism="laplace", M=1000, K=10000,
              rng=None, share_samples=True, path="auto"):
    """Monte Carlo Fisher information, eq. (8) with Algorithm 4 scores, for any family.

    X ~ P_theta (``family``: a Family object or name, default the normal), Y =
    T_l^r(X) + ((r - l)/eps) V with V the standard noise of ``mechanism`` ('laplace',
    'gaussian' or a Mechanism).  M observations y_j ~ p(y|theta); each score by
    Algorithm 4: K samples x_i ~ P_theta, weights = the mechanism's density of
    y_j - T_l^r(x_i) at scale (r - l)/eps, gradients family.score(x_i).  theta: a tuple
    (a scalar for one parameter); None -> (0, 1) for a location-scale family (the base
    distribution of eq. 13), else family.default_theta().

    share_samples=True: the K samples are shared by the M y's (common random numbers).
    share_samples=False: the literal Algorithm 4 (fresh samples per y, O(M K)), and
    se = se_outer.  ``rng``: Generator, int seed, SeedSequence or None; the same seed
    gives bit-identical output.  Returns a :class:`FisherEstimate` with F of shape (d, d).

    The normal family with the Laplace mechanism runs the compiled backend (its own
    draw order: M normals, M Laplace, K normals) unless ``path`` names a generic path
    ('sorted' or 'dense', see the module docstring).
    """
    M, K = check_mc_size("M", M), check_mc_size("K", K)
    check_memory(f"the Monte Carlo Fisher information with M = {M}, K = {K}",
                 fisher_mc_bytes(M, K))
    impl = backend("fisher_mc", family, mechanism) if path == "auto" else None
    if impl is not None:
        return impl(l, r, eps, theta, M=M, K=K, rng=rng, share_samples=share_samples)
    return _fisher_mc_generic(l, r, eps, theta, family, mechanism, M=M, K=K, rng=rng,
                              share_samples=share_samples, path=path)
