"""Quantiles of a marginal posterior density given on grid nodes (both grid posteriors)."""

from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.optimize import brentq


def spline_quantiles(t, dens, q):
    """Quantiles q (any shape) of the density ``dens`` on the nodes t: a cubic spline
    through the nodes, its antiderivative inverted by root finding (also used by
    :mod:`dpbook.likelihood.quadrature`)."""

    q = np.asarray(q, dtype=float)
    cdf = CubicSpline(t, dens).antiderivative()
    at_nodes = np.maximum.accumulate(cdf(t))  # a spline may dip below 0 in a tail
    out = []
    for target in q.ravel() * at_nodes[-1]:
        i = int(np.clip(np.searchsorted(at_nodes, target), 1, t.size - 1))
        if target <= 0 or target >= at_nodes[-1] or at_nodes[i] <= at_nodes[i - 1]:
            out.append(t[0] if target <= 0 else t[i] if target < at_nodes[-1] else t[-1])
            continue
        out.append(brentq(lambda v, c=target: cdf(v) - c, t[i - 1], t[i],
                          xtol=1e-13 * (abs(t[i]) + 1.0)))
    return np.reshape(out, q.shape)
