"""The privacy boundary (Algorithm 1, Proposition 1).

Only a :class:`Population` ever holds the sensitive values x_1, x_2, ...  It answers
one question: "release the next individual's value for the interval [l, r]", which it
does with the mechanism of eq. (10).  Estimators, interval policies and the Fisher
code never receive a population; they receive released values (y, l, r, eps).
By the post-processing theorem (Theorem 1) everything computed from the releases is
then eps-DP as a whole (Proposition 1).
"""

from __future__ import annotations

import numpy as np

from dpbook.model.mechanisms import check_mechanism, release_one
from dpbook.validation import (
    check_count,
    check_eps,
    check_finite,
    check_positive,
    seed_sequence,
)


class Population:
    """A stream of individuals whose sensitive values are released one at a time.

    The values are kept in a closure, not in an attribute, so that code holding the
    population can call :meth:`release` and nothing else that reveals them.

    ``rng``: a seeded numpy Generator, for simulation and reproduction (the book's
    experiments; :func:`dpbook.privacy.individual.seeded_release_for_simulation`), or
    None for deployment: each individual's noise from OpenDP's floating-point-safe
    sampler and the operating system's entropy
    (:func:`dpbook.privacy.individual.private_release`, not reproducible).
    """

    __slots__ = ("_release", "_remaining", "eps", "mechanism")

    def __init__(self, values, eps, rng: np.random.Generator | None,
                 mechanism: str = "laplace"):
        self.eps = check_eps(eps)
        self.mechanism = check_mechanism(mechanism)
        values = check_finite("population values", values)
        # a vector per individual (rows of a 2-d array) is released in a box (issue 54)
        box = values.ndim == 2
        xs = iter(values if box else values.ravel().tolist())
        n = len(values) if box else int(np.size(values))
        counter = [n]
        if rng is None:
            from dpbook.privacy.individual import private_release, require_opendp

            require_opendp()
        elif not isinstance(rng, np.random.Generator):
            raise ValueError("the population's rng must be a numpy Generator (simulation) "
                             "or None (deployment noise from OpenDP)")

        def _release(l, r):
            try:
                x = next(xs)
            except StopIteration:
                raise ValueError("the population has no more individuals") from None
            counter[0] -= 1
            if box:
                return _release_box(x, l, r, self.eps, rng, self.mechanism)
            if rng is None:
                return private_release(x, l, r, self.eps, self.mechanism)
            return release_one(x, l, r, self.eps, rng, self.mechanism)

        self._release = _release
        self._remaining = counter

    def release(self, l: float, r: float) -> float:
        """Y_t = T_l^r(X_t) + (r - l) V_t for the next individual t (eq. 10); for a
        vector, its box's release (:func:`dpbook.multivariate.release.release_box`)."""
        return self._release(l, r)

    def __len__(self) -> int:
        return self._remaining[0]


def _release_box(x, l, r, eps, rng, mechanism):
    from dpbook.multivariate.release import check_box, component_eps, release_box

    if rng is not None:
        return release_box(x, l, r, eps, rng, mechanism)
    from dpbook.privacy.individual import private_release

    l, r = check_box(l, r, len(x))  # OpenDP per component, composed to the box's scale
    return np.array([private_release(*v, mechanism) for v in
                     zip(x, l, r, component_eps(l, r, eps, mechanism))])


def normal_population(n, mu, sigma, eps, seed=None, mechanism="laplace") -> Population:
    """n individuals X_t ~ N(mu, sigma^2) i.i.d. (Section 6), released with eps-DP.

    ``seed`` may be an int, a SeedSequence or a Generator; the sensitive values and
    the privacy noise are drawn from two independent child streams.
    """
    n = check_count("n", n)
    sigma = check_positive("sigma", sigma)
    mu = float(check_finite("mu", mu))
    data_ss, noise_ss = seed_sequence(seed).spawn(2)
    x = np.random.default_rng(data_ss).normal(mu, sigma, size=n)
    return Population(x, eps, np.random.default_rng(noise_ss), mechanism)


def family_population(family, theta, n, eps, seed=None, mechanism="laplace") -> Population:
    """n individuals X_t ~ P_theta i.i.d. for any family, released with eps-DP (eq. 10).

    ``family``: a name or a :class:`dpbook.model.families.Family`; ``theta``: its parameters
    in the order of ``family.params`` (a number for a one-parameter family).  As in
    :func:`normal_population`, the sensitive values and the privacy noise come from two
    independent child streams of ``seed``.
    """
    from dpbook.model.families import as_family

    fam = as_family(family)
    theta = fam.check_theta(*((theta,) if np.ndim(theta) == 0 else tuple(theta)))
    n = check_count("n", n)
    data_ss, noise_ss = seed_sequence(seed).spawn(2)
    x = np.asarray(fam.sample(np.random.default_rng(data_ss), *theta, size=n), float)
    return Population(x, eps, np.random.default_rng(noise_ss), mechanism)
