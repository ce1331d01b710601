"""Compiled backend: Fisher information of one release for the normal/Laplace model.

The backend of :func:`dpbook.fisher.fisher_mc` and :func:`dpbook.fisher.fisher_grid`
for the normal family with the Laplace mechanism (:mod:`dpbook.backends`).

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

Why this module is over 500 lines: ninety of them are this description; the rest is one
estimator, eq. (8) with Algorithm 4 for the paper's model, whose two paths (shared and
fresh samples), the sorted-sum kernels they share and the grid of eq. (13) over them are
read together.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from dpbook.fisher.estimates import (
    FisherEstimate,
    FisherGrid,
    check_lims,
    check_method,
)
from dpbook.likelihood.normal_laplace import fisher_exact
from dpbook.validation import (
    as_generator,
    check_count,
    check_eps,
    check_finite,
    check_interval,
    check_mc_size,
    check_positive,
)

_ROWS_PER_CHUNK = 1 << 20  # elements per block in the fresh-samples path


def _check_theta(mu, sigma):
    mu = check_finite("mu", mu)
    if mu.ndim:
        raise ValueError("mu must be a scalar")
    return float(mu), check_positive("sigma", sigma)


# --------------------------------------------------------------------------- kernels


@njit(cache=True)
def count_le(p, n, y):
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
def sorted_cell(l, r, eps, mu, sigma, zp, v, xs, gs, pre, suf):
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
    nlo = count_le(xs, K, l)          # x <= l: clipped to l
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
        k = count_le(p, n, y) - 1     # last node at or below y
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
        t = count_le(yy, nm, p[i]) - 1
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
        res = sorted_cell(ls[c], rs[c], eps, mu, sigma, zp, v, xs, gs, pre, suf)
        for q in range(_NOUT):
            out[c, q] = res[q]


def run_cells(ls, rs, eps, mu, sigma, zp, v, shared, workers):
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
    M = check_mc_size("M", M)
    K = check_mc_size("K", K)
    rng = as_generator(rng)
    zp, v = _draw_y_base(rng, M)
    if not share_samples:
        s1, s2 = _scores_fresh(rng, l, r, eps, mu, sigma, zp, v, K)
        return _pack(_moments(s1, s2))
    shared = _shared_samples(rng.standard_normal(K), mu, sigma)
    est = _pack(sorted_cell(l, r, eps, mu, sigma, zp, v, *shared))
    if M > 1 and K > 1 and not np.all(np.isfinite(est.se)):
        # the delta-method kernel overflows when y falls more than ~700 noise scales
        # from every sample (very large eps with few samples)
        raise ValueError(f"the Monte Carlo standard error cannot be computed at eps = "
                         f"{eps:g} with K = {K} samples: use a larger K or the exact method")
    return est


def fisher_mc_theta(l, r, eps, theta=None, M=1000, K=10000, rng=None, share_samples=True):
    """:func:`fisher_mc` with theta = (mu, sigma) as one tuple (None: (0, 1)): the
    backend of :func:`dpbook.fisher.fisher_mc` for the normal family, Laplace mechanism."""
    mu, sigma = (0.0, 1.0) if theta is None else theta
    return fisher_mc(l, r, eps, mu, sigma, M=M, K=K, rng=rng, share_samples=share_samples)


def fisher_grid(eps, method="exact", grid=50, lims=(-3.0, 3.0), M=1000, K=10000, seed=0,
                workers=None):
    """Fisher information F_{a,b}^eps(0, 1) on a grid x grid lattice of (a, b), eq. (13).

    a and b both run over np.linspace(lo, hi, grid) (the paper: 50 x 50 on [-3, 3]^2);
    only pairs with a < b are computed.  method='exact' uses the closed-form fisher_exact
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
    check_method(method)
    grid = check_count("grid", grid, 2)
    lo, hi = check_lims(lims)
    vals = np.linspace(lo, hi, grid)
    ia, ib = np.nonzero(vals[:, None] < vals[None, :])
    A, B = vals[ia], vals[ib]
    F = np.full((grid, grid, 2, 2), np.nan)
    if method == "exact":
        Fe = np.asarray(fisher_exact(A, B, eps, 0.0, 1.0), dtype=float)
        if Fe.shape != (A.size, 2, 2):
            raise RuntimeError(f"fisher_exact returned shape {Fe.shape}, expected "
                               f"{(A.size, 2, 2)}")
        F[ia, ib] = Fe
        return FisherGrid(eps, method, vals, vals.copy(), F)
    M = check_mc_size("M", M)
    K = check_mc_size("K", K)
    if workers is None:
        workers = os.cpu_count() or 1
    workers = check_count("workers", workers, 1)
    rng = as_generator(seed, "seed")
    zp, v = _draw_y_base(rng, M)
    shared = _shared_samples(rng.standard_normal(K), 0.0, 1.0)
    out = run_cells(A, B, eps, 0.0, 1.0, zp, v, shared, workers)
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
