"""The exact Fisher information of one release, eq. (7), by quadrature for any family
and mechanism (:func:`fisher_exact`), with the checks that it resolved; the density and
score it integrates are those of :mod:`dpbook.likelihood.quadrature`."""

from __future__ import annotations

import math

import numpy as np

from dpbook.model.families import as_family
from dpbook.model.mechanisms import GaussianMechanism, LaplaceMechanism
from dpbook.validation import check_eps, check_interval

__all__ = ["fisher_exact"]
from dpbook.likelihood.quadrature import (
    CUT_NODES,
    FISHER_CHUNK,
    FISHER_NODES,
    MAX_UNIFORM,
    MAX_UNIFORM_MATRIX,
    UNIFORM_SPACING,
    atom_masses,
    check_theta,
    drop_repeats,
    gauss_legendre,
    log_density,
    middle_discrete,
    noise_offsets,
    panel_nodes,
    score,
    setup,
    theta_info,
)


def _fisher_breaks(l, r, b, info, fam, mech, outer, cap):
    """Sorted y-panel breakpoints (P, K) of the Fisher integral.

    l, r +- the noise half-widths, the family's quantiles and a uniform grid of spacing
    <= 2b over [l, r] cut to the support (the features of p(y) have width ~b); the
    integers in (l, r) for a discrete family (kinks of p(y)).  ``outer``: also the
    tails out to mechanism.tail(b, 1e-16); else everything is clipped to [l, r].
    """
    s_lo, s_hi, q = info
    offs = noise_offsets(mech, b)
    a = np.clip(s_lo, l, r)
    c = np.clip(s_hi, l, r)
    parts = [l[:, None], r[:, None], l[:, None] + offs, r[:, None] - offs]
    if q is not None:
        parts.append(np.broadcast_to(q, (l.size, q.size)))
    n_raw = np.max(np.ceil((c - a) / (UNIFORM_SPACING * b)), initial=0) + 1
    n_u = int(min(n_raw, cap))
    uniform = True
    if fam.discrete:
        k, logw = middle_discrete(l, r, info)
        k = np.where(np.isfinite(logw), k, l[:, None])
        parts.append(k)
        if n_raw > min((1 + 2 * offs.shape[-1]) * k.shape[-1], cap):
            # b << 1: p(y) is a comb of width-b peaks; break around each integer instead
            uniform = False
            parts += [(k[:, :, None] + sgn * offs[:, None, :]).reshape(l.size, -1)
                      for sgn in (-1.0, 1.0)]
    if uniform:
        parts.append(a[:, None] + (c - a)[:, None] * np.linspace(0.0, 1.0, max(n_u, 2)))
    lo, hi = l, r
    if outer:
        t = mech.tail(b, 1e-16)
        lo, hi = l - t, r + t
        parts += [lo[:, None], hi[:, None], l[:, None] - offs, r[:, None] + offs]
    pts = np.concatenate(parts, axis=-1)
    return np.sort(np.clip(pts, lo[:, None], hi[:, None]), axis=-1)


def _scaled_x_values(x, logw, th, fam, shift=None):
    """w p_theta(x) (1, score(x)) / e^shift on x nodes (P, M): (P, M, 1 + d) and shift."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lpx = logw + fam.logpdf(x, *th)
    lpx = np.where(np.isnan(lpx), -np.inf, lpx)
    if shift is None:
        shift = np.max(lpx, axis=-1)
        shift = np.where(np.isfinite(shift), shift, 0.0)
    f = np.exp(lpx - shift[:, None])
    comps = [np.ones_like(x)] + [np.nan_to_num(np.broadcast_to(s, x.shape))
                                 for s in fam.score(x, *th)]
    return f[..., None] * np.stack(comps, axis=-1), shift


def _atom_vectors(fam, l, r, th, shift):
    """(M_l, grad M_l) and (M_r, grad M_r), scaled by e^-shift: two (P, 1 + d) arrays."""
    lml, lmr, gl, gr = atom_masses(fam, l, r, th, True)
    ml = np.exp(lml - shift)
    mr = np.exp(lmr - shift)
    return (ml[:, None] * np.concatenate([np.ones((l.size, 1)), gl], axis=-1),
            mr[:, None] * np.concatenate([np.ones((l.size, 1)), gr], axis=-1))


def _outer_sum(w, v):
    """sum_j w_j p_j s_j s_j^T, p_j = v_j[0] and s_j = v_j[1:]/p_j (the score), over the
    last-but-one axis; v (P, J, 1 + d).  Nodes with p < 1e-280 (relative to the largest
    density ~1 after scaling) contribute nothing and are skipped, not divided by."""
    p = v[..., 0]
    ok = p > 1e-280
    s = v[..., 1:] / np.where(ok, p, 1.0)[..., None]
    return np.einsum("pj,pji,pjk->pik", np.where(ok, w * p, 0.0), s, s)


def _sums(w, v):
    """sum_j w_j (p_j, grad p_j) over the last-but-one axis of v (P, J, 1 + d): the
    integrals of p(y) (1 in exact arithmetic) and of grad p(y) (0: the score has mean
    0), which tell how accurately the rule resolved the score (:func:`fisher_exact`)."""
    return np.einsum("pj,pjc->pc", w, v)


def _fisher_laplace(l, r, eps, th, info, fam, mech):
    """F for a continuous family under the Laplace mechanism (running sums; exact tails)."""
    b = (r - l) / eps
    pts = drop_repeats(_fisher_breaks(l, r, b, info, fam, mech, False, MAX_UNIFORM))
    n = FISHER_NODES
    ynode, ylogw = panel_nodes(pts, n, compact=False)  # (P, (K - 1) n)
    P, K = pts.shape
    # cuts: each breakpoint followed by its panel's nodes, then the last breakpoint
    cuts = np.concatenate([pts[:, :-1, None], ynode.reshape(P, K - 1, n)], axis=-1)
    cuts = np.concatenate([cuts.reshape(P, -1), pts[:, -1:]], axis=-1)
    y_idx = (np.arange(K - 1)[:, None] * (n + 1) + 1 + np.arange(n)).ravel()
    # x rule: CUT_NODES Gauss-Legendre nodes between consecutive cuts
    x, xlogw = panel_nodes(cuts, CUT_NODES, compact=False)
    v, shift = _scaled_x_values(x, xlogw, [np.asarray(t) for t in th], fam)
    m = cuts.shape[1] - 1
    v = v.reshape(P, m, CUT_NODES, -1)
    xs = x.reshape(P, m, CUT_NODES)
    inv_b = (1.0 / b)[:, None]
    # int over a cut panel of p (1, s) e^{(x - right end)/b} and e^{(left end - x)/b}
    i_minus = np.einsum("pmn,pmnc->pmc", np.exp((xs - cuts[:, 1:, None]) * inv_b[..., None]), v)
    i_plus = np.einsum("pmn,pmnc->pmc", np.exp((cuts[:, :-1, None] - xs) * inv_b[..., None]), v)
    decay = np.exp(-np.diff(cuts, axis=-1) * inv_b)[..., None]
    acc = np.zeros((P, m + 1, v.shape[-1]))
    for j in range(m):  # A at cut j + 1: everything to its left
        acc[:, j + 1] = decay[:, j] * acc[:, j] + i_minus[:, j]
    run = np.zeros_like(acc[:, 0])
    for j in range(m - 1, -1, -1):  # B at cut j: everything to its right
        run = decay[:, j] * run + i_plus[:, j]
        acc[:, j] += run
    vl, vr = _atom_vectors(fam, l, r, th, shift)
    g_l = np.exp(-(cuts - l[:, None]) * inv_b)
    g_r = np.exp(-(r[:, None] - cuts) * inv_b)
    tot = (acc + g_l[..., None] * vl[:, None] + g_r[..., None] * vr[:, None]) \
        / (2.0 * b)[:, None, None]
    f = _outer_sum(np.exp(ylogw), tot[:, y_idx])
    g = _sums(np.exp(ylogw), tot[:, y_idx])
    # tails: for y <= l, p(y) = p(l) e^{(y - l)/b} and s(y) = s(l); likewise above r
    f += _outer_sum(np.broadcast_to(b[:, None], (P, 2)), tot[:, [0, -1]])
    g += _sums(np.broadcast_to(b[:, None], (P, 2)), tot[:, [0, -1]])
    return f * np.exp(shift)[:, None, None], g * np.exp(shift)[:, None]


def _fisher_matrix(l, r, eps, th, info, fam, mech):
    """F for any family and mechanism: a fixed x rule and a matrix of noise densities."""
    b = (r - l) / eps
    pts = _fisher_breaks(l, r, b, info, fam, mech, True, MAX_UNIFORM_MATRIX)
    ynode, ylogw = panel_nodes(pts, FISHER_NODES)
    if fam.discrete:
        x, xlogw = middle_discrete(l, r, info)
    else:
        inner = _fisher_breaks(l, r, b, info, fam, mech, False, MAX_UNIFORM_MATRIX)
        s_lo, s_hi, _ = info
        a = np.clip(s_lo, l, r)[:, None]
        c = np.clip(s_hi, l, r)[:, None]
        if mech.kink:  # y nodes as cuts: the kink at x = y is a panel end
            inner = np.sort(np.concatenate([inner, np.clip(ynode, l[:, None], r[:, None])],
                                           axis=-1), axis=-1)
        x, xlogw = panel_nodes(np.clip(inner, a, c), FISHER_NODES)
    v, shift = _scaled_x_values(x, xlogw, [np.asarray(t) for t in th], fam)
    if isinstance(mech, GaussianMechanism):  # the same kernel in fewer passes
        z = (ynode / b[:, None])[:, :, None] - (x / b[:, None])[:, None, :]
        z *= z
        z *= -0.5
        g = np.exp(z, out=z)
        v = v / (b * math.sqrt(2 * math.pi))[:, None, None]
    else:
        g = np.exp(mech.logpdf(ynode[:, :, None] - x[:, None, :], b[:, None, None]))
    return _add_atoms(np.matmul(g, v), ynode, ylogw, l, r, b, th, shift, fam, mech)


def _add_atoms(tot, yn, ylogw, l, r, b, th, shift, fam, mech):
    """(F, g) from the middle's running (p, grad p) ``tot`` on the y nodes ``yn`` (weights
    e^ylogw): the clipped masses at l and r, smoothed by the noise, added first."""
    vl, vr = _atom_vectors(fam, l, r, th, shift)
    tot += mech.pdf(yn - l[:, None], b[:, None])[..., None] * vl[:, None]
    tot += mech.pdf(yn - r[:, None], b[:, None])[..., None] * vr[:, None]
    f = _outer_sum(np.exp(ylogw), tot)
    return (f * np.exp(shift)[:, None, None],
            _sums(np.exp(ylogw), tot) * np.exp(shift)[:, None])


_SMALL_STEPS = np.array([0.0, 1.0, 3.0, 7.0, 15.0])  # geometric panels, in noise scales
_SMALL_NODES = 16  # Gauss-Legendre nodes per panel of the small-noise rule
_SMALL_INTERIOR = 48  # panels between the clip points' neighbourhoods


def _geometric(centre, b, U, sign):
    """Panel ends centre + sign b (0, 1, 3, 7, 15, U): (P, 6), ascending if sign > 0."""
    steps = np.concatenate([_SMALL_STEPS, [U]])
    return centre[:, None] + sign * b[:, None] * steps


def _fisher_small_noise(l, r, eps, th, info, fam, mech):
    """F for a continuous family when the noise scale b is far below the interval: the
    rule for large eps, whose cost does not grow with eps.

    p(y) = M_l f_b(y - l) + M_r f_b(y - r) + int_l^r p(x) f_b(y - x) dx; in the integral
    x = y - b u, so that it runs over the noise u with the noise's own panels
    (geometric: 0, 1, 3, 7, 15 and the noise's 1e-16 tail, on both sides of 0), truncated
    to (y - r)/b < u < (y - l)/b; the score is the same sum with p(x) grad log p(x) and
    the masses' gradients (Fisher's identity).  The y-integral has geometric panels on
    both sides of l and r (the spikes of width b there) and _SMALL_INTERIOR panels
    between, cut at the family's quantiles; outside [l - U b, r + U b] p(y) < 1e-16.
    """
    b = (r - l) / eps
    U = float(mech.tail(1.0, 1e-16))
    # ---- y nodes
    lo_in, hi_in = l + U * b, r - U * b
    inner = lo_in[:, None] + (hi_in - lo_in)[:, None] * np.linspace(0, 1, _SMALL_INTERIOR + 1)
    parts = [_geometric(l, b, U, -1.0)[:, ::-1], _geometric(l, b, U, 1.0), inner,
             _geometric(r, b, U, -1.0)[:, ::-1], _geometric(r, b, U, 1.0)]
    s_lo, s_hi, q = info
    if q is not None:
        parts.append(np.clip(np.broadcast_to(q, (l.size, q.size)), lo_in[:, None],
                             hi_in[:, None]))
    pts = np.sort(np.concatenate(parts, axis=-1), axis=-1)
    yn, ylogw = panel_nodes(pts, _SMALL_NODES, compact=False)  # (P, J)
    P, J = yn.shape
    # ---- u nodes for every y: panels on each side of 0, truncated to the x-range
    side = np.concatenate([_SMALL_STEPS, [U]])
    edges = np.concatenate([-side[::-1], side[1:]])  # -U .. 0 .. U
    u_lo = ((yn - r[:, None]) / b[:, None])[..., None]
    u_hi = ((yn - l[:, None]) / b[:, None])[..., None]
    e = np.clip(edges, u_lo, u_hi)  # (P, J, E)
    xg, wg = gauss_legendre(_SMALL_NODES)
    half = 0.5 * np.diff(e, axis=-1)  # (P, J, E - 1)
    u = (0.5 * (e[..., 1:] + e[..., :-1]))[..., None] + half[..., None] * xg  # (P, J, E-1, n)
    with np.errstate(all="ignore"):  # zero-width panels (truncated) get weight 0
        lw = np.log(half[..., None] * wg) + mech.logpdf(u, 1.0)
    lw = np.where(half[..., None] > 0, lw, -np.inf).reshape(P, -1)
    x = (yn[..., None, None] - b[:, None, None, None] * u).reshape(P, -1)
    v, shift = _scaled_x_values(x, lw, [np.asarray(t) for t in th], fam)
    tot = v.reshape(P, J, -1, v.shape[-1]).sum(axis=2)
    return _add_atoms(tot, yn, ylogw, l, r, b, th, shift, fam, mech)


def fisher_exact(l, r, eps, theta=None, family=None, mechanism="laplace"):
    """Fisher information F_{l,r}^eps(theta) of eq. (7) by quadrature: E[s(Y) s(Y)^T].

    s is the score of :func:`score` (Fisher's identity), Y one release at theta; the
    deterministic counterpart of the Monte Carlo estimate (8) with Algorithm 4.  The
    y-integral is done as described in the module docstring (exact tails and running
    x-sums for the Laplace mechanism, a matrix of noise densities otherwise).  theta
    defaults to (0, 1) for a location-scale family (by Theorem 3 the information at
    (m, c) is F_{(l - m)/c, (r - m)/c}(0, 1)/c^2) and to ``family.default_theta()``
    otherwise.  Vectorised over l, r (broadcast): output (d, d) or (..., d, d).
    """
    fam, mech = setup(family, mechanism)
    eps = check_eps(eps)
    l, r = check_interval(l, r)
    if theta is None:
        theta = (0.0, 1.0) if fam.location_scale else fam.default_theta()
    th = check_theta(fam, theta)
    if any(np.ndim(t) for t in th):
        raise ValueError("fisher_exact needs one theta (a tuple of scalars)")
    th = tuple(float(t) for t in th)
    shape = np.broadcast_shapes(l.shape, r.shape)
    lf = np.broadcast_to(l, shape).ravel()
    rf = np.broadcast_to(r, shape).ravel()
    info = theta_info(fam, th)
    if not np.all(np.isfinite(np.asarray(info[:2], dtype=float))):
        raise ValueError(unlocated_message(fam, th))
    if not fam.discrete:
        info = (float(info[0]), float(info[1]), np.asarray(info[2]).ravel())
    laplace = isinstance(mech, LaplaceMechanism) and not fam.discrete
    run = _fisher_laplace if laplace else _fisher_matrix
    out = np.empty((lf.size, fam.dim, fam.dim))
    b = (rf - lf) / eps
    s_lo, s_hi = info[0], info[1]
    width = np.clip(s_hi, lf, rf) - np.clip(s_lo, lf, rf)
    need = float(np.max(width / (UNIFORM_SPACING * b), initial=0.0))
    cap = MAX_UNIFORM if laplace else MAX_UNIFORM_MATRIX
    if need > cap and not fam.discrete:
        # b far below the interval: the rule whose cost does not grow with eps
        run = _fisher_small_noise
        need = 0.0
    # elements per pair: ~ (breaks x nodes) y nodes times x nodes for the matrix rule
    k_est = 40 + min(cap, need)
    if fam.discrete:
        count = float(min(np.max(rf - lf), s_hi - s_lo)) + 1
        if not count <= MAX_INTEGERS:  # also nan: the family's quantiles failed
            where = "cannot be located (its quantiles are not finite there)" if \
                math.isnan(count) else f"spans {count:.3g} integers"
            raise ValueError(
                f"the exact Fisher information of the {fam.describe()} family at "
                f"{', '.join(f'{q} = {v:g}' for q, v in zip(fam.params, th))} sums over "
                f"the integers where it has mass, which {where}, more than the "
                f"{MAX_INTEGERS} its quadrature holds in memory; use method='mc'")
        k_est += 9 * (float(min(np.max(rf - lf), s_hi - s_lo)) + 1)
    per = (k_est * FISHER_NODES) * (CUT_NODES * 4 if laplace else k_est * FISHER_NODES)
    step = max(1, int(FISHER_CHUNK // per))
    for i in range(0, lf.size, step):
        f, g = run(lf[i:i + step], rf[i:i + step], eps, th, info, fam, mech)
        out[i:i + step] = resolve(0.5 * (f + np.swapaxes(f, -1, -2)), g, lf[i:i + step],
                                  rf[i:i + step], eps, fam,
                                  _second_try(lf[i:i + step], rf[i:i + step], eps, th, info,
                                              fam, mech))
    return out.reshape(shape + (fam.dim, fam.dim))


def _second_try(l, r, eps, th, info, fam, mech):
    """k -> (F, g) of element k by adaptive quadrature (:mod:`dpbook.likelihood.adaptive`)
    from the pointwise density and score of one release: compiled where the engine
    compiles the family (:func:`_compiled_pointwise`), else this module's."""
    from dpbook.likelihood.adaptive import fisher_adaptive

    def run(k):
        lk, rk = float(l[k]), float(r[k])
        compiled = _compiled_pointwise(fam, mech, th)  # asked only when needed: compiling

        def pointwise(y):
            if compiled is not None:
                return compiled(y, lk, rk, eps)
            return (log_density(y, lk, rk, eps, th, fam, mech),
                    score(y, lk, rk, eps, th, fam, mech))

        bulk = [] if info[2] is None else np.asarray(info[2], float).ravel()
        if fam.discrete:  # the integers where the family has mass
            lo, hi = max(lk, float(info[0])), min(rk, float(info[1]))
            bulk = np.arange(math.ceil(lo), math.floor(hi) + 1.0) if hi - lo < 3000 else []
        return fisher_adaptive(pointwise, lk, rk, (rk - lk) / eps, fam.dim, mech, bulk)
    return run


def _compiled_pointwise(fam, mech, th):
    """(y, l, r, eps) -> (log p(y | th), s(y | th) (n, 2)) for an array y, from the
    engine's compiled likelihood terms and score (:mod:`dpbook.likelihood.compiled_quadrature`), or
    None where the engine does not compile this model.  The adaptive second try asks for
    thousands of single points: compiled, each costs microseconds, not the numpy rule's
    millisecond."""
    from dpbook.backends import backend

    if not fam.location_scale:
        return None
    terms, one = backend("loglik_terms", fam, mech), backend("score", fam, mech)
    if terms is None or one is None:
        return None
    theta = np.array([th], dtype=float)

    def pointwise(y, l, r, eps):
        y = np.atleast_1d(np.asarray(y, dtype=float))
        lp = terms(y, np.full(y.shape, l), np.full(y.shape, r), eps, theta)[:, 0]
        return lp, np.array([one(v, l, r, eps, *th) for v in y]).reshape(y.size, 2)
    return pointwise


# the score's computed mean, which is 0 in exact arithmetic, may be at most this fraction
# of its root mean square: a bias delta in the score adds delta^2 to F's diagonal, so F_jj
# keeps a floor of at most 1% of its value.  (Student-t with df 0.1 on [-1e6, 1e6] kept
# F[scale, scale] = 3.1e-7, the square of its mean score 5.5e-4, for every eps below
# 1e-2, where F must fall to 0 with eps.)
SCORE_MEAN_TOL = 0.1
# ... unless the floor is below this fraction of F's largest diagonal entry: an entry that
# small (F[sigma, sigma] of an interval symmetric about mu, which is 0 by symmetry as the
# interval shrinks) is returned to that absolute accuracy
FLOOR_REL = 1e-12
MASS_TOL = 1e-6  # the density of Y must integrate to 1 within this (the rules reach
# 1e-11 on the book's grids; Y = N(0, 1) + N(0, 2^2) on [-1e3, 1e3] lost 3.4e-4 of its mass
# beyond the support's last panel, and F[mu, mu] was 0.8% off, F[sigma, sigma] 5%)


def unlocated_message(fam, th) -> str:
    """The error for a theta where ``fam``'s quantile function is not finite (the
    Poisson's from lam ~ 1e11, scipy's limit): nothing can be computed there."""
    at = ", ".join(f"{q} = {v:g}" for q, v in zip(fam.params, th))
    return (f"the {fam.describe()} family cannot locate its mass at {at}: its quantile "
            f"function is not finite there, so this theta is outside what dpbook computes")


# integers in (l, r) where a discrete family has mass, at most: the matrix rule holds
# (8 y nodes per integer) x (integers) noise densities per interval
MAX_INTEGERS = 3000


def resolve(F, g, l, r, eps, family, second_try):
    """:func:`check_resolved` after a second try: each element of F (P, d, d) whose
    integrals g (P, 1 + d) fail the check is computed again by ``second_try(k)`` ->
    (F_k, g_k) (:mod:`dpbook.likelihood.adaptive`) and replaced when that passes; the
    elements that pass at once keep their bits.  ValueError for what fails both."""
    bad = _unresolved(F, g)
    if not bad.any():
        return F
    F, g = F.copy(), g.copy()
    for k in np.flatnonzero(bad):
        Fk, gk = second_try(int(k))
        if np.all(np.isfinite(Fk)) and not _unresolved(Fk[None], gk[None])[0]:
            F[k], g[k] = Fk, gk
    check_resolved(F, g, l, r, eps, family)
    return F


def _check_terms(F, g):
    """The check of :func:`check_resolved`: (bad (P, d), mass, mean, diag), ``bad`` where
    an element of F (P, d, d) fails for a parameter."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mass = g[:, 0]
        mean = g[:, 1:] / mass[:, None]
        diag = np.diagonal(F, axis1=-2, axis2=-1)
        floor = mean * mean
        bad = ~(np.abs(mass - 1.0) <= MASS_TOL)[:, None] | ~(
            (floor <= SCORE_MEAN_TOL ** 2 * diag)
            | (floor <= FLOOR_REL * np.max(diag, axis=-1, keepdims=True)))
    return bad, mass, mean, diag


def _unresolved(F, g):
    """Which elements of F (P, d, d) fail the check of :func:`check_resolved`, (P,)."""
    return _check_terms(F, g)[0].any(axis=-1)


def check_resolved(F, g, l, r, eps, family):
    """ValueError when a Fisher rule did not resolve the score: F (P, d, d) came with
    g (P, 1 + d), its integrals of p(y) and grad p(y); the score's computed mean
    (g[:, 1:] / g[:, 0], 0 in exact arithmetic) must be negligible beside its root mean
    square sqrt(F_jj) and the density must integrate to 1 (g[:, 0]).  Also the check of
    the closed form (:mod:`dpbook.likelihood.normal_laplace`).  ``eps`` a scalar or one
    per element."""
    fam = as_family(family)
    eps = np.broadcast_to(np.asarray(eps, dtype=float), (F.shape[0],))
    bad, mass, mean, diag = _check_terms(F, g)
    if not bad.any():
        return
    i = int(np.flatnonzero(bad.any(axis=-1))[0])
    where = (f"the Fisher information of the {fam.describe()} family cannot be computed "
             f"accurately for [l, r] = [{l[i]:g}, {r[i]:g}] at eps = {eps[i]:g}")
    if not abs(mass[i] - 1.0) <= MASS_TOL:
        why = f"the density of a release integrates to {mass[i]:.6g} in its quadrature, not 1"
    else:
        j = int(np.argmax(np.abs(mean[i]) / np.sqrt(np.maximum(diag[i], 1e-300))))
        why = (f"the quadrature's score for {fam.params[j]} has mean {mean[i, j]:.2g} (0 in "
               f"exact arithmetic), not negligible beside its root mean square "
               f"{math.sqrt(max(diag[i, j], 0.0)):.2g}, so F[{fam.params[j]}, "
               f"{fam.params[j]}] would be a numerical floor")
    raise ValueError(f"{where}: {why}; use a narrower interval, another eps or the Monte "
                     f"Carlo method (method='mc')")
