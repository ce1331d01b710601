"""The exact posterior (5) on a grid, x_{1:n} integrated out: the reference the SMC and
MHAAR are checked against.

:func:`exact_posterior` is the public entry point for every family and mechanism; it
returns a :class:`GridPosterior`.  The normal family with the Laplace mechanism runs the
closed-form backend :mod:`dpbook.posterior.normal_laplace` (chosen in
:mod:`dpbook.backends`), every other model the quadrature of
:mod:`dpbook.posterior.quadrature`.

:func:`central_posterior` is its counterpart for a central release (noisy clipped sums,
:mod:`dpbook.posterior.central`, chapter 11), also a :class:`GridPosterior`.
"""

from dpbook.backends import backend
from dpbook.posterior.central import central_posterior
from dpbook.posterior.grid import GridPosterior
from dpbook.posterior.quadrature import exact_posterior_quadrature


def exact_posterior(y, l, r, eps, family=None, mechanism="laplace", generic=False, **kw):
    """p(theta | y_{1:n}) of eq. (5) on a grid, as a :class:`GridPosterior`.

    ``kw`` go to the implementation: for the normal/Laplace backend ``grid`` (n_mu,
    n_sigma), ``bounds`` and ``tol`` (see
    :func:`dpbook.posterior.normal_laplace.exact_posterior_normal_laplace`); otherwise
    ``grid``, ``bounds`` and ``theta_grid`` (see
    :func:`dpbook.posterior.quadrature.exact_posterior_quadrature`).  ``generic=True``
    runs the quadrature for the normal/Laplace model too.
    """
    impl = None if generic else backend("posterior", family, mechanism)
    if impl is not None:
        return impl(y, l, r, eps, **kw)
    return exact_posterior_quadrature(y, l, r, eps, family, mechanism, **kw)


__all__ = ["central_posterior", "exact_posterior", "GridPosterior"]
