"""Fisher information of one released observation and the grid search for (a*, b*).

Paper, Section 5 and Appendix C.  X ~ N(mu, sigma^2), theta = (mu, sigma), and the
released value is

    Y = T_l^r(X) + b V,   V ~ Laplace(scale 1),   b = (r - l)/eps        (eq. 10)

The Fisher information of one Y is eq. (7),
``F = E[grad log p(Y|theta) grad log p(Y|theta)^T]``, and its Monte Carlo estimate is
eq. (8): ``F ~ (1/M) sum_j s_j s_j^T`` with ``y_j ~ p(y|theta)`` and each score ``s_j``
from Algorithm 4 (self-normalised importance sampling of Fisher's identity): draw
``x_i ~ N(mu, sigma^2)``, ``i = 1..K``, weight ``w_i = Laplace(y - T_l^r(x_i); b)`` and

    s = sum_i w_i grad log N(x_i) / sum_i w_i,
    grad log N(x) = ((x - mu)/sigma^2, ((x - mu)^2/sigma^2 - 1)/sigma).

The best interval for the base distribution is eq. (13),
``(a*, b*) = argmax_{a<b} sc(F_{a,b}^eps(0, 1))``, with sc = F[0, 0] ('mu', the
paper's choice in Section 6) or the trace; Theorem 3 transfers it to any (m, c) by
``l = m + a c, r = m + b c``.

Fast path (``share_samples=True``, the default)
------------------------------------------------
Brute force costs M K weight evaluations per interval (1e7 at the paper's sizes,
5e10 for the paper's 1225-pair grid at four eps).  Instead the K x-samples are shared
by the M y's of one interval (common random numbers; each individual score keeps
exactly the distribution of Algorithm 4's output, only the M scores become dependent
through the shared x's).  With the samples sorted, the clipped values ``c_i`` are
sorted too; the samples at or below l (c = l) and at or above r (c = r) are two lumps.
Calling the distinct positions p_0 < p_1 < ... (lump at l, the samples inside (l, r),
lump at r) with g-sums G_k (k = 0: count, 1, 2: the two score components), the
weight of node i for an observation y with p_j <= y < p_{j+1} factorises as

    exp((p_i - y)/b) = exp((p_i - p_j)/b) exp((p_j - y)/b)           (i <= j)
    exp((y - p_i)/b) = exp((p_{j+1} - p_i)/b) exp((y - p_{j+1})/b)   (i > j)

so ``sum_i w_i G_k(i) = P_k[j] e^{d_lo} + Q_k[j+1] e^{d_hi}`` with the recursive
prefix sums ``P_k[i] = P_k[i-1] exp(-(p_i - p_{i-1})/b) + G_k[i]`` and suffix sums
``Q_k`` likewise.  Every factor lies in (0, 1], and the common factor
``exp(max(d_lo, d_hi))`` cancels in the ratio, so nothing overflows or underflows
for any eps (this is the same split as anchoring at l and r, but anchored at the
neighbouring samples, which also covers eps in the hundreds).  For y < l (y > r)
only Q_k[0] (P_k[last]) is left: the score does not depend on y there.  Cost:
O(K log K) once per theta, O(K + M log K) per interval.  The tests check this
equals a brute-force Algorithm 4 on the same samples to ~1e-10.

``share_samples=False`` is the literal Algorithm 4: fresh K samples for every y
(O(M K), for small sizes).

Random numbers
--------------
All draws are standardised base draws made in this order from one
``numpy.random.Generator``: ``z'`` (M standard normals) and ``v`` (M standard
Laplace) for the observations ``y_j = T_l^r(mu + sigma z'_j) + b v_j``, then the
importance samples ``x_i = mu + sigma z_i`` (K standard normals; M x K, row by row,
when ``share_samples=False``).  Hence the same seed gives bit-identical output, and
the location-scale identity of Theorem 3,
``F_{m+ac, m+bc}(m, c) = F_{a,b}(0, 1)/c^2``, holds for the *estimates* too, sample
by sample, up to floating-point rounding (the same z's give the same weights).

``fisher_grid`` uses ``np.random.default_rng(seed)`` and the same base draws for
every cell (and, with the same seed, for every eps): common random numbers, so the
estimated surface is smooth in (a, b) and the argmax compares cells on the same
noise; cell (a, b) is bit-identical to ``fisher_mc(a, b, eps,
rng=np.random.default_rng(seed))``.  Cells run in parallel (a thread pool over
numba kernels that release the GIL), each cell computed sequentially by one thread
with a fixed summation order, so results do not depend on the number of threads.

Standard errors and bias
------------------------
``se_outer`` is the standard error of the mean of the M outer products ``s_j s_j^T``
(sample standard deviation, ddof = 1, over sqrt(M); NaN when M = 1), elementwise, and
``se_outer_trace`` that of ``s_j^T s_j``.  With shared samples that is not the whole
Monte Carlo error: the K samples are common to every j, so their error does not
average out over j.  ``se`` / ``se_trace`` add it by the delta method (first-order
projection of the estimator on the y's and the x's):

    se^2 = se_outer^2 + Var_i(H(x_i)) / K,
    H(x_i) = (1/M) sum_j [s_j d_ij^T + d_ij s_j^T],  d_ij = K w_ij/W_j (g(x_i) - s_j),

d_ij being the influence of sample i on the self-normalised score s_j (W_j = sum_i
w_ij).  H is computed for all i by the same sorted-sum trick over the y's, O((M + K)
log M) per interval.  At the paper's sizes and optimal intervals se is 1.04-1.55 times
se_outer, and across seeds the estimates scatter like se (checked in the tests).
With ``share_samples=False`` the M terms are independent and se = se_outer.

Both variants share the O(1/K) upward bias of eq. (8) with Algorithm 4 scores:
E[s_hat s_hat^T] = F + E[Var(s_hat | y)] (self-normalised importance sampling).  It
is below 1e-3 of F_mumu for the intervals of Section 6 at K = 10^4, but reaches a few
per cent of F_sigmasigma for wide intervals at small eps (~2/K at [-1, 1], eps = 1),
and it is not in se.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numba import njit

from .validation import check_count, check_eps, check_finite, check_interval, check_positive

METHODS = ("exact", "mc")
SCORES = ("mu", "trace")

_ROWS_PER_CHUNK = 1 << 20  # elements per block in the fresh-samples path


@dataclass(frozen=True)
class FisherEstimate:
    """A Fisher information matrix (eq. 7) for theta = (mu, sigma).

    F : (..., 2, 2) array.  For the Monte Carlo estimate of eq. (8) (``None`` for method
    'exact'): se, se_trace : total Monte Carlo standard errors of F and of its trace
    (outer M y-draws plus, with shared samples, the K shared Algorithm 4 samples, by
    the delta method); se_outer, se_outer_trace : the standard error of the mean of the
    M outer products s_j s_j^T alone (equal to se with fresh samples).
    """

    F: np.ndarray
    se: np.ndarray | None = None
    se_trace: float | None = None
    se_outer: np.ndarray | None = None
    se_outer_trace: float | None = None

    @property
    def trace(self):
        return np.trace(self.F, axis1=-2, axis2=-1)


# --------------------------------------------------------------------------- checks


def _check_method(method):
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return method


def _check_score(score):
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {', '.join(SCORES)}")
    return score


def _check_lims(lims):
    try:
        lo, hi = (float(v) for v in lims)
    except (TypeError, ValueError):
        raise ValueError(f"lims must be two finite numbers (lo, hi), got {lims!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise ValueError(f"lims must be two finite numbers with lo < hi, got {lims!r}")
    return lo, hi


def _check_count(name, value, minimum):
    return check_count(name, value, minimum)


def _as_generator(rng):
    """A Generator from a Generator, an int seed, a SeedSequence or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer, np.random.SeedSequence)):
        return np.random.default_rng(rng)
    raise ValueError(f"rng must be a numpy Generator, an int seed or a SeedSequence, "
                     f"got {type(rng).__name__}")


def _check_theta(mu, sigma):
    mu = check_finite("mu", mu)
    if mu.ndim:
        raise ValueError("mu must be a scalar")
    return float(mu), check_positive("sigma", sigma)


# --------------------------------------------------------------------------- kernels


@njit(cache=True)
def _count_le(p, n, y):
    """Number of p[0..n) with p <= y (p ascending); binary search."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if p[mid] <= y:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _count_lt(p, n, y):
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if p[mid] < y:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _argsort(key):
    """Stable ascending argsort (bottom-up merge sort; cheaper to compile than np.argsort)."""
    n = key.shape[0]
    idx = np.arange(n)
    tmp = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if key[idx[j]] < key[idx[i]]:
                    tmp[k] = idx[j]
                    j += 1
                else:
                    tmp[k] = idx[i]
                    i += 1
                k += 1
            while i < mid:
                tmp[k] = idx[i]
                i += 1
                k += 1
            while j < hi:
                tmp[k] = idx[j]
                j += 1
                k += 1
        idx, tmp = tmp, idx
        width *= 2
    return idx


@njit(cache=True)
def _cell(l, r, eps, mu, sigma, zp, v, xs, gs, pre, suf):
    """Eq. (8) with Algorithm 4 scores for one interval, K samples shared by the M y's.

    xs: the K importance samples, ascending; gs: (2, K) their grad log N components;
    pre / suf: (5, K + 1) sums of (g1, g2, g1^2, g1 g2, g2^2) over the first / last n.
    Returns (F11, F12, F22, outer se x 3, outer se of trace, total se x 3, total se of
    trace); see the module docstring.
    """
    K = xs.shape[0]
    M = zp.shape[0]
    bn = (r - l) / eps
    # ---- nodes: lump at l, samples inside (l, r), lump at r; G = (count, g1, g2, g1^2,
    # g1 g2, g2^2) summed over the node
    nlo = _count_le(xs, K, l)          # x <= l: clipped to l
    hst = _count_lt(xs, K, r)          # x >= r (indices hst..K-1): clipped to r
    nhi = K - hst
    nmax = hst - nlo + 2
    p = np.empty(nmax)
    G = np.empty((6, nmax))
    n = 0
    if nlo > 0:
        p[0] = l
        G[0, 0] = nlo
        for q in range(5):
            G[q + 1, 0] = pre[q, nlo]
        n = 1
    for i in range(nlo, hst):
        g1 = gs[0, i]
        g2 = gs[1, i]
        p[n] = xs[i]
        G[0, n] = 1.0
        G[1, n] = g1
        G[2, n] = g2
        G[3, n] = g1 * g1
        G[4, n] = g1 * g2
        G[5, n] = g2 * g2
        n += 1
    if nhi > 0:
        p[n] = r
        G[0, n] = nhi
        for q in range(5):
            G[q + 1, n] = suf[q, nhi]
        n += 1
    # ---- anchored prefix (P) and suffix (Q) sums of (count, g1, g2); all factors <= 1
    E = np.empty(n)                    # E[i] = exp(-(p[i] - p[i-1])/bn)
    E[0] = 1.0
    for i in range(1, n):
        E[i] = math.exp(-(p[i] - p[i - 1]) / bn)
    P = np.empty((3, n))
    Q = np.empty((3, n))
    for q in range(3):
        P[q, 0] = G[q, 0]
        for i in range(1, n):
            P[q, i] = P[q, i - 1] * E[i] + G[q, i]
        Q[q, n - 1] = G[q, n - 1]
        for i in range(n - 2, -1, -1):
            Q[q, i] = Q[q, i + 1] * E[i + 1] + G[q, i]
    # ---- Algorithm 4 score of every y_j
    s1 = np.empty(M)
    s2 = np.empty(M)
    ys = np.empty(M)
    invW = np.empty(M)                 # 1 / sum_i exp(-|y_j - c_i|/bn), for y_j between nodes
    kind = np.empty(M, np.int8)        # -1: y_j < p[0], 1: y_j >= p[n-1], 0: between
    for j in range(M):
        y = min(max(mu + sigma * zp[j], l), r) + bn * v[j]
        ys[j] = y
        k = _count_le(p, n, y) - 1     # last node at or below y
        if k < 0:
            S0, S1, S2 = Q[0, 0], Q[1, 0], Q[2, 0]
            kind[j] = -1
        elif k == n - 1:
            S0, S1, S2 = P[0, k], P[1, k], P[2, k]
            kind[j] = 1
        else:
            dlo = (p[k] - y) / bn      # <= 0
            dhi = (y - p[k + 1]) / bn  # < 0
            if dlo >= dhi:
                mx, flo, fhi = dlo, 1.0, math.exp(dhi - dlo)
            else:
                mx, flo, fhi = dhi, math.exp(dlo - dhi), 1.0
            S0 = P[0, k] * flo + Q[0, k + 1] * fhi
            S1 = P[1, k] * flo + Q[1, k + 1] * fhi
            S2 = P[2, k] * flo + Q[2, k + 1] * fhi
            kind[j] = 0
            invW[j] = math.exp(-mx) / S0
        s1[j] = S1 / S0
        s2[j] = S2 / S0
    m11, m12, m22, o11, o12, o22, otr = _moments(s1, s2)
    # ---- error from the K shared samples (delta method): H(x_i) = (1/M) sum_j IF_j(x_i),
    # IF_j(x_i) = K w_ij/W_j (g_i - s_j) the influence of x_i on s_j, pushed through s s^T
    # T_q(i) = sum_j w_ij/W_j coef_q(j), coef = (s1, s2, s1^2, s1 s2, s2^2)
    Cb = np.zeros(5)
    Ca = np.zeros(5)
    nm = 0
    nb = 0
    for j in range(M):
        if kind[j] == 0:
            nm += 1
        else:
            if kind[j] < 0:
                nb += 1
                C = Cb
            else:
                C = Ca
            C[0] += s1[j]
            C[1] += s2[j]
            C[2] += s1[j] * s1[j]
            C[3] += s1[j] * s2[j]
            C[4] += s2[j] * s2[j]
    mid = np.empty(nm, np.int64)
    t = 0
    for j in range(M):
        if kind[j] == 0:
            mid[t] = j
            t += 1
    order = _argsort(ys[mid])
    yy = np.empty(nm)
    U = np.empty((5, nm))
    for t in range(nm):
        j = mid[order[t]]
        yy[t] = ys[j]
        w = invW[j]
        U[0, t] = s1[j] * w
        U[1, t] = s2[j] * w
        U[2, t] = s1[j] * s1[j] * w
        U[3, t] = s1[j] * s2[j] * w
        U[4, t] = s2[j] * s2[j] * w
    R = np.empty((5, nm))              # R[q, t] = sum_{t' <= t} U[q, t'] exp(-(yy[t] - yy[t'])/bn)
    Rb = np.empty((5, nm))             # Rb[q, t] = sum_{t' >= t} U[q, t'] exp(-(yy[t'] - yy[t])/bn)
    if nm > 0:
        Ey = np.empty(nm)
        Ey[0] = 1.0
        for t in range(1, nm):
            Ey[t] = math.exp(-(yy[t] - yy[t - 1]) / bn)
        for q in range(5):
            R[q, 0] = U[q, 0]
            for t in range(1, nm):
                R[q, t] = R[q, t - 1] * Ey[t] + U[q, t]
            Rb[q, nm - 1] = U[q, nm - 1]
            for t in range(nm - 2, -1, -1):
                Rb[q, t] = Rb[q, t + 1] * Ey[t + 1] + U[q, t]
    sc = K / M
    T = np.empty(5)
    sH = np.zeros(4)
    sH2 = np.zeros(4)
    al = np.empty(4)
    b1 = np.empty(4)
    b2 = np.empty(4)
    for i in range(n):
        for q in range(5):
            T[q] = 0.0
        if nb > 0:
            f = math.exp(-(p[i] - p[0]) / bn) / Q[0, 0]
            for q in range(5):
                T[q] += Cb[q] * f
        if nb + nm < M:
            f = math.exp(-(p[n - 1] - p[i]) / bn) / P[0, n - 1]
            for q in range(5):
                T[q] += Ca[q] * f
        t = _count_le(yy, nm, p[i]) - 1
        if t >= 0:
            f = math.exp((yy[t] - p[i]) / bn)
            for q in range(5):
                T[q] += R[q, t] * f
        if t + 1 < nm:
            f = math.exp((p[i] - yy[t + 1]) / bn)
            for q in range(5):
                T[q] += Rb[q, t + 1] * f
        # H = al + b1 g1 + b2 g2 for each sample of the node, for (11, 12, 22, trace)
        al[0], b1[0], b2[0] = -2.0 * sc * T[2], 2.0 * sc * T[0], 0.0
        al[1], b1[1], b2[1] = -2.0 * sc * T[3], sc * T[1], sc * T[0]
        al[2], b1[2], b2[2] = -2.0 * sc * T[4], 0.0, 2.0 * sc * T[1]
        al[3], b1[3], b2[3] = al[0] + al[2], b1[0] + b1[2], b2[0] + b2[2]
        for q in range(4):
            a_, c1, c2 = al[q], b1[q], b2[q]
            sH[q] += a_ * G[0, i] + c1 * G[1, i] + c2 * G[2, i]
            sH2[q] += (a_ * a_ * G[0, i] + c1 * c1 * G[3, i] + c2 * c2 * G[5, i]
                       + 2.0 * (a_ * c1 * G[1, i] + a_ * c2 * G[2, i] + c1 * c2 * G[4, i]))
    tot = np.empty(4)
    outer = (o11, o12, o22, otr)
    for q in range(4):
        if K > 1:
            vh = max(sH2[q] - sH[q] * sH[q] / K, 0.0) / (K - 1.0)
            tot[q] = math.sqrt(outer[q] * outer[q] + vh / K)
        else:
            tot[q] = np.nan
    return (m11, m12, m22, o11, o12, o22, otr, tot[0], tot[1], tot[2], tot[3])


@njit(cache=True)
def _moments(s1, s2):
    """(F11, F12, F22, se11, se12, se22, se_trace) from the M scores (two-pass)."""
    M = s1.shape[0]
    m11 = 0.0
    m12 = 0.0
    m22 = 0.0
    for j in range(M):
        m11 += s1[j] * s1[j]
        m12 += s1[j] * s2[j]
        m22 += s2[j] * s2[j]
    m11 /= M
    m12 /= M
    m22 /= M
    mt = m11 + m22
    v11 = 0.0
    v12 = 0.0
    v22 = 0.0
    vt = 0.0
    for j in range(M):
        d11 = s1[j] * s1[j] - m11
        d12 = s1[j] * s2[j] - m12
        d22 = s2[j] * s2[j] - m22
        dt = s1[j] * s1[j] + s2[j] * s2[j] - mt
        v11 += d11 * d11
        v12 += d12 * d12
        v22 += d22 * d22
        vt += dt * dt
    if M > 1:
        c = 1.0 / ((M - 1.0) * M)
        return (m11, m12, m22, math.sqrt(v11 * c), math.sqrt(v12 * c), math.sqrt(v22 * c),
                math.sqrt(vt * c))
    nan = np.nan
    return m11, m12, m22, nan, nan, nan, nan


_NOUT = 11


@njit(nogil=True, cache=True)
def _cells(ls, rs, eps, mu, sigma, zp, v, xs, gs, pre, suf, out, lo, hi):
    """Cells lo..hi-1 of the grid into out (runs without the GIL, one thread per call)."""
    for c in range(lo, hi):
        res = _cell(ls[c], rs[c], eps, mu, sigma, zp, v, xs, gs, pre, suf)
        for q in range(_NOUT):
            out[c, q] = res[q]


def _run_cells(ls, rs, eps, mu, sigma, zp, v, shared, workers):
    """All cells, in chunks over a thread pool; every cell is computed by one call of
    _cell on the same inputs, so the result does not depend on workers or scheduling."""
    out = np.empty((ls.size, _NOUT))
    chunk = 8
    bounds = [(lo, min(lo + chunk, ls.size)) for lo in range(0, ls.size, chunk)]
    if workers == 1 or len(bounds) <= 1:
        _cells(ls, rs, eps, mu, sigma, zp, v, *shared, out, 0, ls.size)
        return out
    with ThreadPoolExecutor(max_workers=workers) as ex:
        futures = [ex.submit(_cells, ls, rs, eps, mu, sigma, zp, v, *shared, out, lo, hi)
                   for lo, hi in bounds]
        for fu in futures:
            fu.result()
    return out


# --------------------------------------------------------------------------- helpers


def _draw_y_base(rng, M):
    zp = rng.standard_normal(M)
    v = rng.laplace(0.0, 1.0, size=M)
    return zp, v


def _shared_samples(z, mu, sigma):
    """Sorted importance samples x = mu + sigma z, their grad log N terms, prefix sums."""
    xs = mu + sigma * np.sort(z)
    d = xs - mu
    g1 = d / sigma**2
    g2 = (d * d / sigma**2 - 1.0) / sigma
    terms = np.stack([g1, g2, g1 * g1, g1 * g2, g2 * g2])
    zero = np.zeros((5, 1))
    pre = np.concatenate([zero, np.cumsum(terms, axis=1)], axis=1)
    suf = np.concatenate([zero, np.cumsum(terms[:, ::-1], axis=1)], axis=1)
    return xs, np.ascontiguousarray(terms[:2]), pre, suf


def _pack(res):
    res = np.asarray(res, dtype=float)
    sym = lambda a, b, c: np.array([[a, b], [b, c]])  # noqa: E731
    outer = sym(*res[3:6])
    if res.size == 7:  # independent scores (fresh samples): the outer se is the whole se
        return FisherEstimate(F=sym(*res[:3]), se=outer, se_trace=float(res[6]),
                              se_outer=outer, se_outer_trace=float(res[6]))
    return FisherEstimate(F=sym(*res[:3]), se=sym(*res[7:10]), se_trace=float(res[10]),
                          se_outer=outer, se_outer_trace=float(res[6]))


def _scores_fresh(rng, l, r, eps, mu, sigma, zp, v, K):
    """Literal Algorithm 4: fresh K samples x ~ N(mu, sigma^2) for every y_j."""
    M = zp.shape[0]
    bn = (r - l) / eps
    y = np.minimum(np.maximum(mu + sigma * zp, l), r) + bn * v
    s1 = np.empty(M)
    s2 = np.empty(M)
    rows = max(1, _ROWS_PER_CHUNK // K)
    for start in range(0, M, rows):
        stop = min(M, start + rows)
        x = mu + sigma * rng.standard_normal((stop - start, K))
        logw = -np.abs(y[start:stop, None] - np.minimum(np.maximum(x, l), r)) / bn
        w = np.exp(logw - logw.max(axis=1, keepdims=True))  # Laplace(y - T(x); bn), rescaled
        d = x - mu
        sw = w.sum(axis=1)
        s1[start:stop] = (w * (d / sigma**2)).sum(axis=1) / sw
        s2[start:stop] = (w * ((d * d / sigma**2 - 1.0) / sigma)).sum(axis=1) / sw
    return s1, s2


# --------------------------------------------------------------------------- public API


def fisher_mc(l, r, eps, mu=0.0, sigma=1.0, M=1000, K=10000, rng=None, share_samples=True):
    """Monte Carlo Fisher information, eq. (8), with scores from Algorithm 4.

    Estimates F_{l,r}^eps(theta) of eq. (7) for theta = (mu, sigma), X ~ N(mu, sigma^2),
    Y = T_l^r(X) + ((r - l)/eps) V, V ~ Laplace(1): M observations y_j ~ p(y|theta),
    each score by Algorithm 4 with K importance samples from N(mu, sigma^2).

    share_samples=True (default): the K samples are shared by the M y's (common
    random numbers) and the scores come from the exact O(K + M log K) sorted-prefix-sum
    evaluation described in the module docstring; each score has exactly Algorithm 4's
    distribution.  share_samples=False: fresh samples for every y, literally as in
    Algorithm 4 (O(M K) time; use small sizes).

    rng: a numpy Generator, an int seed or a SeedSequence (None: fresh OS entropy).
    Draw order: M normals, M Laplace, then the K (or M x K) normals; the same rng state
    gives bit-identical output.  Returns a FisherEstimate: F, its total standard error
    se (and se_trace), and se_outer, the standard error of the mean of the M outer
    products alone (see the module docstring).
    """
    eps = check_eps(eps)
    l, r = check_interval(l, r)
    if l.ndim or r.ndim:
        raise ValueError("fisher_mc takes scalar l and r; use fisher_grid for many intervals")
    l, r = float(l), float(r)
    mu, sigma = _check_theta(mu, sigma)
    M = _check_count("M", M, 1)
    K = _check_count("K", K, 1)
    rng = _as_generator(rng)
    zp, v = _draw_y_base(rng, M)
    if not share_samples:
        s1, s2 = _scores_fresh(rng, l, r, eps, mu, sigma, zp, v, K)
        return _pack(_moments(s1, s2))
    shared = _shared_samples(rng.standard_normal(K), mu, sigma)
    return _pack(_cell(l, r, eps, mu, sigma, zp, v, *shared))


def _fisher_exact(l, r, eps, mu, sigma):
    from .exact import fisher_exact  # lazy: dpbook.exact may land after this module

    return np.asarray(fisher_exact(l, r, eps, mu, sigma), dtype=float)


def fisher_information(l, r, eps, mu=0.0, sigma=1.0, method="exact", M=1000, K=10000,
                       rng=None, share_samples=True):
    """Fisher information F_{l,r}^eps(mu, sigma) of one released Y, eq. (7).

    method='exact': ``dpbook.exact.fisher_exact`` (numerical integration of eq. (7);
    broadcasts over arrays l, r; M, K, rng, share_samples are ignored) and se = None.
    method='mc': ``fisher_mc``, the Monte Carlo estimate of eq. (8) with Algorithm 4
    scores, with standard errors.  Returns a FisherEstimate.
    """
    _check_method(method)
    if method == "mc":
        return fisher_mc(l, r, eps, mu, sigma, M=M, K=K, rng=rng, share_samples=share_samples)
    eps = check_eps(eps)
    l, r = check_interval(l, r)
    mu, sigma = _check_theta(mu, sigma)
    return FisherEstimate(F=_fisher_exact(l, r, eps, mu, sigma))


@dataclass(frozen=True)
class FisherGrid:
    """F_{a,b}^eps(0, 1) on a grid of intervals (a, b) for the search of eq. (13).

    F[i, j] is the 2 x 2 Fisher information (eq. 7 exact, or eq. 8 with Algorithm 4)
    for a = a_values[i], b = b_values[j]; NaN where a >= b.  se / se_trace: Monte Carlo
    standard errors (method 'mc'), else None.
    """

    eps: float
    method: str
    a_values: np.ndarray
    b_values: np.ndarray
    F: np.ndarray
    se: np.ndarray | None = None
    se_trace: np.ndarray | None = None
    se_outer: np.ndarray | None = None
    se_outer_trace: np.ndarray | None = None

    def scores(self, score="mu"):
        """The score surface sc(F) of eq. (13): F[0, 0] ('mu') or the trace."""
        _check_score(score)
        if score == "mu":
            return self.F[..., 0, 0]
        return self.F[..., 0, 0] + self.F[..., 1, 1]

    def score_se(self, score="mu"):
        """Monte Carlo standard error of scores(score) (total, see se); None for 'exact'."""
        _check_score(score)
        if self.se is None:
            return None
        return self.se[..., 0, 0] if score == "mu" else self.se_trace

    def best(self, score="mu"):
        """(a*, b*, score value, se) maximising sc(F_{a,b}^eps(0, 1)), eq. (13).

        Ties go to the first cell in row-major (a, then b) order; se is None for 'exact'.
        """
        S = self.scores(score)
        i, j = np.unravel_index(np.nanargmax(S), S.shape)
        se = self.score_se(score)
        return (float(self.a_values[i]), float(self.b_values[j]), float(S[i, j]),
                None if se is None else float(se[i, j]))


def fisher_grid(eps, method="exact", grid=50, lims=(-3.0, 3.0), M=1000, K=10000, seed=0,
                workers=None):
    """Fisher information F_{a,b}^eps(0, 1) on a grid x grid lattice of (a, b), eq. (13).

    a and b both run over np.linspace(lo, hi, grid) (the paper: 50 x 50 on [-3, 3]^2);
    only pairs with a < b are computed.  method='exact' uses dpbook.exact.fisher_exact
    (eq. 7); method='mc' estimates eq. (8) with Algorithm 4 scores at the paper's sizes
    M, K by default, using the fast shared-sample path.

    Random numbers (mc): ``np.random.default_rng(seed)`` (seed: int, SeedSequence or a
    Generator, used as is) draws one set of base draws
    (M normals, M Laplace, K normals) used by every cell (common random numbers; the
    same for every eps with the same seed), so cell (a, b) equals
    ``fisher_mc(a, b, eps, rng=np.random.default_rng(seed))`` bit for bit.  Cells are
    computed in parallel by ``workers`` threads (default: all cores); each cell is one
    sequential computation, so the result does not depend on the number of threads.
    """
    eps = check_eps(eps)
    _check_method(method)
    grid = _check_count("grid", grid, 2)
    lo, hi = _check_lims(lims)
    vals = np.linspace(lo, hi, grid)
    ia, ib = np.nonzero(vals[:, None] < vals[None, :])
    A, B = vals[ia], vals[ib]
    F = np.full((grid, grid, 2, 2), np.nan)
    if method == "exact":
        Fe = _fisher_exact(A, B, eps, 0.0, 1.0)
        if Fe.shape != (A.size, 2, 2):
            raise RuntimeError(f"fisher_exact returned shape {Fe.shape}, expected "
                               f"{(A.size, 2, 2)}")
        F[ia, ib] = Fe
        return FisherGrid(eps, method, vals, vals.copy(), F)
    M = _check_count("M", M, 1)
    K = _check_count("K", K, 1)
    if workers is None:
        workers = os.cpu_count() or 1
    workers = _check_count("workers", workers, 1)
    rng = _as_generator(seed)
    zp, v = _draw_y_base(rng, M)
    shared = _shared_samples(rng.standard_normal(K), 0.0, 1.0)
    out = _run_cells(A, B, eps, 0.0, 1.0, zp, v, shared, workers)
    F[ia, ib] = out[:, [0, 1, 1, 2]].reshape(-1, 2, 2)

    def spread(cols):
        a = np.full((grid, grid, 2, 2), np.nan)
        a[ia, ib] = out[:, cols].reshape(-1, 2, 2)
        return a

    def flat(col):
        a = np.full((grid, grid), np.nan)
        a[ia, ib] = out[:, col]
        return a

    return FisherGrid(eps, method, vals, vals.copy(), F, se=spread([7, 8, 8, 9]),
                      se_trace=flat(10), se_outer=spread([3, 4, 4, 5]), se_outer_trace=flat(6))


def best_interval(eps, method="exact", grid=50, lims=(-3.0, 3.0), score="mu", M=1000,
                  K=10000, seed=0):
    """The grid maximiser (a*, b*) of eq. (13), sc(F_{a,b}^eps(0, 1)).

    sc is F[0, 0] ('mu', Section 6) or the trace of the Fisher information (eq. 7 for
    'exact', eq. 8 with Algorithm 4 for 'mc'; see fisher_grid for the grid and the
    random numbers).  Returns {"a", "b", "score", "se"} (se None for 'exact').
    """
    _check_score(score)
    a, b, s, se = fisher_grid(eps, method, grid, lims, M, K, seed).best(score)
    return {"a": a, "b": b, "score": s, "se": se}


# =========================================================================== any family
#
# eq. (8) with Algorithm 4 for any Family and Mechanism (the issue "Adapt to new
# distributions and mechanisms").  The normal-specific code above is unchanged.

PATHS = ("auto", "sorted", "dense")
_DENSE_BLOCK = 1 << 15  # elements of one (rows x nodes) weight block: stays in cache


def _check_path(path):
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


def _mc_setup(family, mechanism, theta):
    from .families import as_family
    from .mechanisms import get_mechanism

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
        k = _count_le(p, n, yj)
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
    from .mechanisms import GaussianMechanism, LaplaceMechanism

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
        res = _cell(l, r, eps, 0.0, 1.0, xy, v, *sorted_inputs)
        return _unpack_cell(res, gs.shape[1])
    return _dense_shared_cell(l, r, eps, mech, xy, v, xs, gs)


def fisher_mc_family(l, r, eps, theta=None, family=None, mechanism="laplace", M=1000,
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
        raise ValueError("fisher_mc_family takes scalar l and r; use "
                         "dpbook.intervals.fisher_grid_family for many intervals")
    l, r = float(l), float(r)
    fam, mech, theta = _mc_setup(family, mechanism, theta)
    M = _check_count("M", M, 1)
    K = _check_count("K", K, 1)
    path = _resolve_path(_check_path(path), mech, fam.dim)
    rng = _as_generator(rng)
    xy, v = _draw_family_base(rng, fam, mech, theta, M)
    if not share_samples:
        s = _dense_fresh_scores(rng, l, r, eps, mech, fam, theta, xy, v, K)
        F, se, se_tr = _outer_moments(s)
        return FisherEstimate(F=F, se=se, se_trace=se_tr, se_outer=se, se_outer_trace=se_tr)
    x = np.asarray(fam.sample(rng, *theta, size=K), dtype=float)
    xs, gs = _sorted_family_samples(x, fam, theta)
    F, se, se_tr, so, so_tr = _shared_cell(l, r, eps, mech, xy, v, xs, gs, path)
    return FisherEstimate(F=F, se=se, se_trace=se_tr, se_outer=so, se_outer_trace=so_tr)
