"""Exact Fisher information of one release, eq. (7), for any family and mechanism.

F_{l,r}^eps(theta) = E[s(Y) s(Y)^T], s the score of the density of one released value
Y = T_l^r(X) + ((r - l)/eps) V.  :func:`fisher_exact` is the public entry point: the
closed form of :mod:`dpbook.likelihood.normal_laplace` for the normal family with the
Laplace mechanism (chosen by :mod:`dpbook.backends`), numerical integration by
:mod:`dpbook.likelihood.fisher_quadrature` otherwise.  :func:`fisher_information` gives
either it or the Monte Carlo estimate (eq. 8) as a :class:`FisherEstimate`.
"""

from __future__ import annotations

import numpy as np

from dpbook.backends import backend
from dpbook.fisher.estimates import FisherEstimate, check_method
from dpbook.fisher.mc import fisher_mc
from dpbook.likelihood import fisher_quadrature


def fisher_exact(l, r, eps, theta=None, family=None, mechanism="laplace"):
    """F_{l,r}^eps(theta) of eq. (7); vectorised over l, r: output (d, d) or (..., d, d).

    theta defaults to (0, 1) for a location-scale family (by Theorem 3 the information
    at (m, c) is F_{(l - m)/c, (r - m)/c}(0, 1)/c^2) and to ``family.default_theta()``
    otherwise.
    """
    impl = backend("fisher_exact", family, mechanism)
    if impl is not None:
        return impl(l, r, eps, theta)
    return fisher_quadrature.fisher_exact(l, r, eps, theta, family, mechanism)


def fisher_information(l, r, eps, theta=None, family=None, mechanism="laplace",
                       method="exact", M=1000, K=10000, rng=None, share_samples=True):
    """Fisher information F_{l,r}^eps(theta) of one released Y as a :class:`FisherEstimate`.

    method='exact': :func:`fisher_exact` (eq. 7; M, K, rng, share_samples are ignored)
    and se = None.  method='mc': :func:`dpbook.fisher.fisher_mc`, eq. (8) with Algorithm
    4 scores, with standard errors.
    """
    check_method(method)
    if method == "mc":
        return fisher_mc(l, r, eps, theta, family, mechanism, M=M, K=K, rng=rng,
                         share_samples=share_samples)
    return FisherEstimate(F=np.asarray(fisher_exact(l, r, eps, theta, family, mechanism),
                                       dtype=float))
