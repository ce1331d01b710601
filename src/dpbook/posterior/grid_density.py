"""The result type of the exact posterior (eq. 5): a posterior density on a product grid."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpbook.posterior.quantiles import node_cdf, node_quantiles, spline_quantiles


@dataclass(frozen=True)
class GridPosterior:
    """A posterior density on a product grid (see :func:`exact_posterior`).

    ``axes[j]`` are the nodes of parameter ``params[j]``, uniform in theta_j, or in
    log theta_j where ``log_axes[j]`` (positive parameters); ``weights[j]`` their
    trapezoid weights (in that coordinate, times the Jacobian); ``log_post`` the log
    density (w.r.t. d theta) on the grid, normalised so that
    sum exp(log_post) prod_j weights[j] = 1.  ``log_evidence`` is log of the integral of
    eta(theta) prod_t p(y_t | theta) over the box; ``edge`` the largest log density on
    the box's boundary minus the largest overall, w.r.t. d log theta_j for positive
    parameters (about -25 or below when the box holds the posterior).
    """

    params: tuple
    axes: list
    log_post: np.ndarray
    log_evidence: float
    edge: float
    weights: list = field(repr=False)
    log_axes: tuple = ()

    def _density(self):
        return np.exp(self.log_post)

    def marginal(self, j):
        """(axis, marginal density) of parameter j (an index or a name)."""
        j = self._index(j)
        p = self._density()
        for k in reversed(range(len(self.axes))):
            if k != j:
                p = np.tensordot(p, self.weights[k], axes=([k], [0]))
        return self.axes[j], p

    def _index(self, j):
        if isinstance(j, str):
            if j not in self.params:
                raise ValueError(f"unknown parameter {j!r}; choose one of {', '.join(self.params)}")
            return self.params.index(j)
        if not 0 <= int(j) < len(self.params):
            raise ValueError(f"parameter index must be in 0..{len(self.params) - 1}, got {j!r}")
        return int(j)

    def mean(self):
        """Posterior means, array (d,)."""
        out = []
        for j in range(len(self.axes)):
            x, p = self.marginal(j)
            out.append(np.sum(self.weights[j] * p * x))
        return np.array(out)

    def sd(self):
        """Posterior standard deviations, array (d,)."""
        m = self.mean()
        out = []
        for j in range(len(self.axes)):
            x, p = self.marginal(j)
            out.append(math.sqrt(np.sum(self.weights[j] * p * (x - m[j]) ** 2)))
        return np.array(out)

    def quantile(self, q):
        """Marginal posterior quantiles: shape (d,) for a scalar q, (len(q), d) otherwise.

        The marginal density (w.r.t. the grid's coordinate: theta_j, or log theta_j) is
        interpolated by a cubic spline through the nodes, whose antiderivative is
        inverted by root finding (error ~h^4, h the node spacing).
        """
        qa = np.asarray(q, dtype=float)
        if not np.all((qa >= 0) & (qa <= 1)):
            raise ValueError("quantile levels must lie in [0, 1]")
        cols = []
        for j in range(len(self.axes)):
            x, p = self.marginal(j)
            if j < len(self.log_axes) and self.log_axes[j]:
                cols.append(np.exp(spline_quantiles(np.log(x), p * x, qa.ravel())))
            else:
                cols.append(spline_quantiles(x, p, qa.ravel()))
        out = np.stack(cols, axis=-1)
        return out[0] if qa.ndim == 0 else out.reshape(qa.shape + (len(self.axes),))

    def cdf(self, values):
        """Marginal posterior cdf of each parameter at ``values`` (one per parameter),
        array (d,).  The marginal mass per unit of node index (density times trapezoid
        weight; the grid is uniform in its own coordinate) is integrated by a cubic
        spline up to the value's position among the nodes (monotone interpolation);
        values outside the grid give 0 or 1."""
        if len(values) != len(self.axes):
            raise ValueError(f"cdf needs one value per parameter {self.params}, got {values!r}")
        return np.array([node_cdf(*self.marginal(j), self.weights[j], v)
                         for j, v in enumerate(values)])

    def marginal_frame(self):
        """The marginal densities in long form: one row per node and parameter (param,
        x, density)."""
        import pandas as pd

        return pd.concat([pd.DataFrame({"param": p, **dict(zip(("x", "density"),
                                                                self.marginal(j)))})
                          for j, p in enumerate(self.params)], ignore_index=True)

    def summary(self):
        """{param: {"mean": .., "sd": ..}} as plain floats."""
        m, s = self.mean(), self.sd()
        return {p: {"mean": float(a), "sd": float(b)} for p, a, b in zip(self.params, m, s)}


@dataclass(frozen=True)
class NodeGridPosterior(GridPosterior):
    """A grid posterior whose nodes are not uniform in the parameters (sinh grids): its
    quantiles interpolate the marginal mass per unit of node index
    (:func:`~dpbook.posterior.quantiles.node_quantiles`; a spline in sigma itself
    oscillated across the geometric tail: a median of sigma at 1e12)."""

    def quantile(self, q):
        qa = np.asarray(q, dtype=float)
        if not np.all((qa >= 0) & (qa <= 1)):
            raise ValueError("quantile levels must lie in [0, 1]")
        out = np.stack([node_quantiles(*self.marginal(j), self.weights[j], qa.ravel())
                        for j in range(len(self.axes))], axis=-1)
        return out[0] if qa.ndim == 0 else out.reshape(qa.shape + (len(self.axes),))
