"""The second try of the exact Fisher information, eq. (7): adaptive quadrature.

Every exact Fisher rule (the closed form of :mod:`dpbook.likelihood.normal_laplace`,
the quadrature rules of :mod:`dpbook.likelihood.quadrature`) integrates p(y), which must
be 1, and p(y) s(y), the score's mean, which must be 0, beside F = int p s s^T dy, and
refuses where either is off (:func:`dpbook.likelihood.fisher_quadrature.check_resolved`).  Its
fixed panels can miss mass that is plainly computable: on [-1e4, 1e4] at eps = 2000 the
noise (scale b = 10) spreads the release over hundreds of noise scales around the
values, far from the closed form's panels, and p(y) integrated to 0.99966.  Where a
rule's check fails, :func:`fisher_adaptive` integrates the same three quantities again
with ``scipy.integrate.quad_vec`` (adaptive Gauss-Kronrod, subdividing where the
integrand needs it) from the pointwise density and score, with break points where p(y)
has kinks or spikes: l and r (the clipped masses), l + b (1, 3, 7, 15, 40) and the
mirror at r, and the family's quantiles (its bulk) with the same steps either side.
Beyond [l, r] the Laplace mechanism's tails are exact: for y > r, p(y) = p(r)
e^{-(y - r)/b} and s(y) = s(r), which contribute b p(r) s(r) s(r)^T (likewise below l);
another mechanism's density is integrated out to where 1e-18 of the noise's mass is
left beyond the ends.  The result is accepted only if its own integrals pass the same
check; otherwise the rule's refusal stands.
"""

from __future__ import annotations

import numpy as np

from dpbook.model.mechanisms import LaplaceMechanism

EPSREL = 1e-10  # quad_vec's relative tolerance on the vector (p, p s, p s s^T)
LIMIT = 4000  # subintervals at most
_SPIKE = np.array([1.0, 3.0, 7.0, 15.0, 40.0])  # break points, in noise scales from l, r
_TAIL_MASS = 1e-18  # another mechanism's density integrated to where this mass is left


def fisher_adaptive(pointwise, l, r, b, d, mechanism, bulk=()):
    """(F (d, d), g (1 + d,)): int p s s^T dy and int p (1, s) dy for one release on
    [l, r] with noise scale ``b``.  ``pointwise(y)`` gives (log p(y), s(y) (n, d)) for
    an array y; ``bulk``: points where the values' distribution has its mass."""
    from scipy.integrate import quad_vec

    def vec(p, s):
        outer = s[:, :, None] * s[:, None, :]
        return np.concatenate([p[:, None], p[:, None] * s,
                               p[:, None] * outer.reshape(-1, d * d)], axis=1)

    def f(y):
        lp, s = pointwise(np.array([y]))
        p = np.exp(np.asarray(lp, float).reshape(1))
        return vec(p, np.asarray(s, float).reshape(1, d))[0]

    laplace = isinstance(mechanism, LaplaceMechanism)
    reach = 0.0 if laplace else float(mechanism.tail(b, _TAIL_MASS))
    lo, hi = l - reach, r + reach
    bulk = np.ravel(np.asarray(bulk, float))
    # the values' bulk smoothed by the noise: break points out to 40 noise scales
    spread = (bulk[:, None] + b * np.concatenate([-_SPIKE, _SPIKE])).ravel()
    pts = np.concatenate([[l, r], l + b * _SPIKE, r - b * _SPIKE, bulk, spread])
    pts = np.unique(pts[np.isfinite(pts) & (pts > lo) & (pts < hi)])
    with np.errstate(all="ignore"):
        total, _ = quad_vec(f, lo, hi, epsrel=EPSREL, epsabs=0.0, norm="max", limit=LIMIT,
                            points=list(pts))
        if laplace:  # the exact tails beyond l and r
            lp, s = pointwise(np.array([l, r]))
            total = total + b * vec(np.exp(np.asarray(lp, float)),
                                    np.asarray(s, float).reshape(2, d)).sum(axis=0)
    F = total[1 + d:].reshape(d, d)
    return 0.5 * (F + F.T), total[:1 + d]
