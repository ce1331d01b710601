"""Independent references for the ledger (book/claims.py): code that shares nothing with
dpbook's, so that a check compares two computations and not the package with itself.

* :func:`release_density` and :func:`fisher_by_quadrature`: the density of one release
  Y = T_l^r(X) + ((r - l)/eps) V and its Fisher information (eq. 7) in the original
  coordinates (m, c), from a scipy distribution, by Gauss-Legendre quadrature and finite
  differences of log p in theta.  No standardisation to (0, 1), no closed form, no score
  formula: Theorem 3 and Lemma 2 are then checked, not assumed.
* :func:`loss_lower_bound`: an empirical lower bound on the privacy loss of a release
  from draws at two neighbouring inputs (Clopper-Pearson bounds on the masses of tail
  events, Bonferroni over the events), the audit of Theorem 2 on the shipped release.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

_GL = {}


def _gl(n):
    if n not in _GL:
        _GL[n] = np.polynomial.legendre.leggauss(n)
    return _GL[n]


def gl_nodes(pts, n):
    """Gauss-Legendre nodes and weights on the panels between consecutive ``pts``
    (shape (..., P + 1)): arrays of shape (..., P n)."""
    x, w = _gl(n)
    lo, hi = pts[..., :-1, None], pts[..., 1:, None]
    half = 0.5 * (hi - lo)
    nodes = lo + half * (1.0 + x)
    return (nodes.reshape(*pts.shape[:-1], -1),
            (half * w).reshape(*pts.shape[:-1], -1))


def release_density(y, l, r, eps, dist, m, n=48):
    """p(y) of Y = T_l^r(X) + ((r - l)/eps) V, X ~ ``dist`` (a frozen scipy
    distribution), V ~ Laplace(1): the two clipped masses times the noise density, plus
    the integral over [l, r] of dist.pdf(x) times it (panels split at y and at ``m``, where
    a family's density may have a kink)."""
    y = np.asarray(y, float)
    B = (r - l) / eps

    def lap(v):
        return np.exp(-np.abs(v) / B) / (2 * B)

    atoms = dist.cdf(l) * lap(y - l) + dist.sf(r) * lap(y - r)
    pts = np.sort(np.stack(np.broadcast_arrays(l, np.clip(y, l, r), np.clip(m, l, r), r),
                           axis=-1), axis=-1)
    x, w = gl_nodes(pts, n)
    return atoms + np.sum(w * dist.pdf(x) * lap(y[..., None] - x), axis=-1)


def fisher_by_quadrature(l, r, eps, make, m, c, n=48, tails=40.0, pieces=4):
    """F_{l,r}^eps(m, c) of eq. (7) in the original coordinates: E[s s^T] with s the
    gradient in (m, c) of log p(y | m, c) by a five-point central difference (step 1e-3 c),
    p by :func:`release_density` of ``make(m, c)``, and the expectation by Gauss-Legendre
    over y on [l - tails B, r + tails B] (B = (r - l)/eps), in panels split at l, r, m and
    ``pieces`` equal parts of [l, r].  Returns (F, integral of p over y) (the latter 1 up
    to the rule's error)."""
    B = (r - l) / eps
    inner = np.unique(np.concatenate([np.linspace(l, r, pieces + 1), [np.clip(m, l, r)]]))
    y, w = gl_nodes(np.concatenate([[l - tails * B], inner, [r + tails * B]]), n)

    def logp(mm, cc):
        return np.log(release_density(y, l, r, eps, make(mm, cc), mm, n))

    lp = logp(m, c)
    h = 1e-3 * c
    s = np.empty((2, y.size))
    for j in range(2):
        def at(k, j=j):
            return logp(m + k * h, c) if j == 0 else logp(m, c + k * h)

        s[j] = (at(-2) - 8 * at(-1) + 8 * at(1) - at(2)) / (12 * h)
    p = np.exp(lp) * w
    return np.einsum("k,ik,jk->ij", p, s, s), float(p.sum())


# scipy's distributions in their own loc-scale parameterisation, for the families the
# ledger checks (the Student-t at dpbook's default df)
SCIPY_FAMILIES = {
    "normal": lambda m, c: stats.norm(loc=m, scale=c),
    "laplace": lambda m, c: stats.laplace(loc=m, scale=c),
    "student_t": lambda m, c: stats.t(5.0, loc=m, scale=c),
}


# ---------------------------------------------------------------------- privacy audit

def clopper_pearson(k, n, alpha):
    """Two-sided (1 - alpha) Clopper-Pearson interval for a binomial proportion."""
    k = np.asarray(k, float)
    lo = np.where(k > 0, stats.beta.ppf(alpha / 2, k, n - k + 1), 0.0)
    hi = np.where(k < n, stats.beta.ppf(1 - alpha / 2, k + 1, n - k), 1.0)
    return lo, hi


def loss_lower_bound(y0, y1, thresholds, alpha):
    """A (1 - alpha) lower confidence bound on the privacy loss between the releases of
    two neighbouring inputs, from their draws ``y0`` and ``y1``: over the events
    S = {Y > t} and {Y <= t} for each threshold t, and both orders of the pair,
    log(lower bound of P(S | one) / upper bound of P(S | other)), the largest; each
    Clopper-Pearson interval at alpha / (number of events) (Bonferroni).  Returns (the
    bound, the smallest excess of the loss over the bound's target that it detects with
    80% power: z (se_0 + se_1) + z_0.8 sqrt(se_0^2 + se_1^2) at the event that gives it,
    the se's those of the two log masses)."""
    a, b = np.sort(y0), np.sort(y1)
    t = np.asarray(thresholds, float)
    below = np.stack([np.searchsorted(a, t, "right"), np.searchsorted(b, t, "right")])
    n = np.array([a.size, b.size])[:, None]
    counts = np.concatenate([below, n - below], axis=1)  # P(Y <= t), P(Y > t)
    level = alpha / (2 * counts.shape[1])  # events x both orders
    lo, hi = clopper_pearson(counts, n, level)
    with np.errstate(divide="ignore"):
        ratios = np.concatenate([np.log(lo[0]) - np.log(hi[1]), np.log(lo[1]) - np.log(hi[0])])
    k = int(np.argmax(ratios))
    pair = (counts[0], counts[1]) if k < counts.shape[1] else (counts[1], counts[0])
    j = k % counts.shape[1]
    se = [np.sqrt((1 - c[j] / nn) / max(c[j], 1)) for c, nn in zip(pair, n[:, 0])]
    z = stats.norm.isf(level / 2)
    return float(ratios[k]), float(z * sum(se) + stats.norm.isf(0.2) * np.hypot(*se))
