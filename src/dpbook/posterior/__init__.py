"""The exact posterior (5) on a grid, x_{1:n} integrated out: the reference the SMC and
MHAAR are checked against.

:func:`exact_posterior` is the public entry point for every family and mechanism; it
returns a :class:`GridPosterior`.  One pipeline (:mod:`dpbook.posterior.exact`) runs
every model; what differs is the log-likelihood grid, chosen in :mod:`dpbook.backends`:
the closed form of the paper's normal/Laplace model, the compiled engine of
:mod:`dpbook.likelihood.compiled_quadrature` for a location-scale family, or the numpy quadrature.

:func:`central_posterior` is its counterpart for a central release (noisy clipped sums,
:mod:`dpbook.posterior.central_grid`, chapter 11), also a :class:`GridPosterior`.
"""

from dpbook import backends
from dpbook.model.families import as_family
from dpbook.model.mechanisms import get_mechanism
from dpbook.posterior.central_grid import central_posterior
from dpbook.posterior.exact import grid_posterior, numpy_model
from dpbook.posterior.grid_density import GridPosterior
from dpbook.validation import check_eps, check_observations


def exact_posterior(y, l, r, eps, family=None, mechanism="laplace", generic=False, **kw):
    """p(theta | y_{1:n}) of eq. (5) on a grid, as a :class:`GridPosterior` (one or two
    parameters): eta(theta) prod_t p(y_t | theta), x_t integrated out.

    ``kw`` (:func:`dpbook.posterior.exact.grid_posterior`): ``grid``, nodes per parameter
    (default (101, 101), or 201 for one parameter);
    ``bounds``: one (lo, hi) pair per parameter (uniform nodes in theta_j, or log theta_j
    for a positive parameter), else the box and sinh nodes around the mode are found
    automatically and the grid refined while the quadrature error exceeds ``tol``
    posterior sd (``tol``, default 1e-5).  ``generic=True``: no registered backend, and
    the engine's likelihood for the paper's model too, not its closed form.  With clipping the
    posterior of a scale can have infinite variance: moments are those of the box,
    quantiles the robust summaries.
    """
    y, l, r = check_observations(y, l, r)
    eps = check_eps(eps)
    fam, mech = as_family(family), get_mechanism(mechanism)
    if fam.dim not in (1, 2):
        raise ValueError(f"exact_posterior grids one or two parameters; {fam.name} has {fam.dim}")
    impl = None if generic else backends.backend("posterior", fam, mech)
    if impl is not None:  # a registered replacement (book, "Extending dpbook")
        return impl(y, l, r, eps, **kw)
    make = (backends.engine if generic else backends.backend)("posterior_model", fam, mech)
    model = make(y, l, r, eps) if make is not None else numpy_model(fam, mech, y, l, r, eps)
    return grid_posterior(model, **kw)


__all__ = ["central_posterior", "exact_posterior", "GridPosterior"]
