"""The fast path of eq. (8) with Algorithm 4 (``share_samples=True``): the K importance
samples shared by the M y's of one interval, sorted, and the interval's scores from
prefix and suffix sums (mechanism Laplace, d <= 2: :func:`sorted_cell`, :func:`run_cells`
for eq. (13)'s grid) or from cache-sized weight blocks (any other mechanism or d:
:func:`dense_shared_cell`).  The algebra is in :mod:`dpbook.fisher.mc`'s docstring."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from dpbook.model.mechanisms import KIND

_DENSE_BLOCK = 1 << 15  # elements of one (rows x nodes) weight block: stays in cache


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


@njit(inline="always")
def _two_way_sums(x, n, G, rows, bn):
    """Anchored prefix and suffix sums of G[:rows, :n] on ascending points x (all
    factors <= 1): P[q, i] = sum_{i' <= i} G[q, i'] exp(-(x[i] - x[i'])/bn) and
    Q[q, i] = sum_{i' >= i} G[q, i'] exp(-(x[i'] - x[i])/bn)."""
    P = np.empty((rows, n))
    Q = np.empty((rows, n))
    if n == 0:
        return P, Q
    E = np.empty(n)  # E[i] = exp(-(x[i] - x[i-1])/bn)
    E[0] = 1.0
    for i in range(1, n):
        E[i] = math.exp(-(x[i] - x[i - 1]) / bn)
    for q in range(rows):
        P[q, 0] = G[q, 0]
        for i in range(1, n):
            P[q, i] = P[q, i - 1] * E[i] + G[q, i]
        Q[q, n - 1] = G[q, n - 1]
        for i in range(n - 2, -1, -1):
            Q[q, i] = Q[q, i + 1] * E[i + 1] + G[q, i]
    return P, Q


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
    hst = np.searchsorted(xs, r)       # x >= r (indices hst..K-1): clipped to r
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
    P, Q = _two_way_sums(p, n, G, 3, bn)  # of (count, g1, g2)
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
    R, Rb = _two_way_sums(yy, nm, U, 5, bn)
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
    sorted_cell on the same inputs, so the result does not depend on workers or scheduling."""
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



def sorted_shared(xs, gs):
    """Inputs (xs, gs, pre, suf) of sorted_cell from the sorted samples and their scores
    gs (K, d <= 2; a zero second component when d = 1): gs as two rows and the prefix /
    suffix sums of g1, g2, g1^2, g1 g2, g2^2 over the first / last n samples."""
    g1 = gs[:, 0]
    g2 = gs[:, 1] if gs.shape[1] > 1 else np.zeros(xs.size)
    terms = np.stack([g1, g2, g1 * g1, g1 * g2, g2 * g2])
    zero = np.zeros((5, 1))
    pre = np.concatenate([zero, np.cumsum(terms, axis=1)], axis=1)
    suf = np.concatenate([zero, np.cumsum(terms[:, ::-1], axis=1)], axis=1)
    return xs, np.ascontiguousarray(terms[:2]), pre, suf


def unpack_cell(res, d):
    """sorted_cell's 11 numbers -> (F, se, se_trace, se_outer, se_outer_trace) for d = 1, 2."""
    res = np.asarray(res, dtype=float)
    if d == 1:
        one = lambda q: res[q].reshape(1, 1)  # noqa: E731
        return one(0), one(7), float(res[7]), one(3), float(res[3])
    sym = lambda a, b, c: np.array([[a, b], [b, c]])  # noqa: E731
    return (sym(*res[:3]), sym(*res[7:10]), float(res[10]), sym(*res[3:6]), float(res[6]))


def outer_moments(s):
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
def dot4(a, b, n):
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
                S[q] = dot4(u, NG[q], n)
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

    if type(mech) in KIND:
        _logk_block(y, p, b, KIND[type(mech)] == 1, U)
    else:  # any other Mechanism: its log density, numpy
        U[...] = mech.logpdf(y[:, None] - p[None, :], b)
        U -= U.max(axis=1, keepdims=True)


def dense_shared_cell(l, r, eps, mech, xy, v, xs, gs):
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
    F, se_o, se_o_tr = outer_moments(s)
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


