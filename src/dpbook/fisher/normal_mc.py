"""The paper model's own primitives of Algorithm 4 / eq. (8): the normal family with the
Laplace mechanism (Section 6).

Everything else of the estimator (the common random numbers shared by the M y's and
by every interval of eq. (13)'s grid, the sorted prefix sums that make one interval
O(K + M log K), the delta-method standard errors, the fresh-samples path) is the one
engine of :mod:`dpbook.fisher.mc`, the same for every family and mechanism.  Here the
paper's model overrides, as a ``scipy.stats`` distribution overrides a generic method
with a closed form, only

* its draws: M standard normals, M Laplace(1) variables, then the K (or M x K)
  standard normals, from the ``numpy.random.Generator`` (the draws behind the paper's
  numbers, ``dpbook fisher`` and ``dpbook best-interval``), where any other model draws
  keyed uniforms through its quantile function;
* its score of eq. (8)'s importance samples, in closed form:
  grad log N(x) = ((x - mu)/sigma^2, ((x - mu)^2/sigma^2 - 1)/sigma).

:mod:`dpbook.backends` registers :class:`PaperEngine` for exactly these two classes.
"""

from __future__ import annotations

import numpy as np

from dpbook.fisher.mc_primitives import FisherEngine


class PaperEngine(FisherEngine):
    """The normal family with the Laplace mechanism (Section 6): the engine with the
    paper model's own draws (standard normals and Laplace(1) from the Generator, in the
    module docstring's order) and closed-form score (eq. 8's grad log N)."""

    def release_draws(self, rng, M):
        return rng.standard_normal(M), rng.laplace(0.0, 1.0, size=M)

    def sample_draws(self, rng, n, part):
        return rng.standard_normal(n)

    def grad(self, z, theta):
        mu, sigma = theta
        d = (mu + sigma * z) - mu
        g = np.empty((2, z.size))
        np.divide(d, sigma**2, out=g[0])
        np.multiply(d, d, out=g[1])  # then (d d / sigma^2 - 1) / sigma, in that order
        g[1] /= sigma**2
        g[1] -= 1.0
        g[1] /= sigma
        return g
