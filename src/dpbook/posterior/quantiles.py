"""Quantiles of a marginal posterior density given on grid nodes (both grid posteriors)."""

from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline, PchipInterpolator
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


def _index_mass(density, w):
    """Mass per unit of node index of a density on nodes with trapezoid weights w: a
    grid is uniform in its own coordinate, whatever its nodes are in the parameter."""
    mass = np.asarray(density, dtype=float) * w
    mass[[0, -1]] *= 2.0  # the trapezoid rule halves the end weights
    return mass


def node_quantiles(x, density, w, q):
    """Quantiles q of a marginal density on (possibly non-uniform) nodes x with
    trapezoid weights w: :func:`spline_quantiles` in the node index, mapped back to x
    by monotone interpolation."""
    index = np.arange(np.size(x), dtype=float)
    return PchipInterpolator(index, x)(spline_quantiles(index, _index_mass(density, w), q))


def node_cdf(x, density, w, value):
    """The cdf at ``value`` of a marginal density on nodes x with trapezoid weights w,
    by the construction of :func:`node_quantiles`; 0 or 1 outside the nodes."""
    if value <= x[0] or value >= x[-1]:
        return 0.0 if value <= x[0] else 1.0
    index = np.arange(np.size(x), dtype=float)
    cum = CubicSpline(index, _index_mass(density, w)).antiderivative()
    position = PchipInterpolator(x, index)(value)
    return float(np.clip(cum(position) / cum(index[-1]), 0.0, 1.0))
