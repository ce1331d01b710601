"""The individual's side of Algorithm 1: one value, one published interval, eps -> one
release Y = T_l^r(x) + noise of scale (r - l)/eps (eq. 10).

Two samplers, for two uses:

* :func:`private_release`, **for deployment**: the noise comes from OpenDP's samplers
  (``opendp.measurements.make_laplace`` / ``make_gaussian``), which draw from a discrete
  distribution on a grid of floats (Canonne, Kamath and Steinke 2020) with random bits
  from a generator seeded by the operating system's entropy.  The textbook sampler
  ``b * log(U)`` on doubles, which numpy's ``Generator.laplace`` is, leaves holes and
  uneven gaps in the set of outputs that can reveal the clipped value (Mironov 2012,
  "On significance of the least significant bits for differential privacy"); OpenDP's
  grid sampler has none.  Not reproducible, by design.
* :func:`seeded_release_for_simulation`, **for simulation and reproduction only**: numpy's
  seeded Laplace (or normal) sampler on doubles, :func:`dpbook.model.mechanisms.release_one`,
  the sampler of every experiment in the book (:class:`dpbook.privacy.population.Population`
  uses it).  Its numbers are reproducible from the seed, which is what a deployment must
  not have, and it is not floating-point safe.

The curator's side is :class:`dpbook.privacy.curator.Curator`.
"""

from __future__ import annotations

import functools
import math

from dpbook.model.mechanisms import check_mechanism, release_one
from dpbook.validation import check_eps, check_finite_number, check_one_interval


def require_opendp():
    """OpenDP's prelude with its ``contrib`` features on; a one-line ValueError when the
    package is missing."""
    try:
        import opendp.prelude as dp
    except ImportError:  # pinned in requirements.txt; a bare pip install may lack it
        raise ValueError("private_release needs the opendp package (pip install opendp): "
                         "dpbook draws deployment noise only with OpenDP's samplers") from None
    dp.enable_features("contrib")
    return dp


@functools.lru_cache(maxsize=256)
def _measurement(mechanism, width, eps):
    """An OpenDP measurement adding noise of scale (r - l)/eps whose privacy map certifies
    at most eps (Laplace, pure DP) or rho = eps^2 / 2 (Gaussian, zero-concentrated DP)
    for inputs that differ by r - l, rounded up (the clipped values' sensitivity)."""
    dp = require_opendp()
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    d_in = math.nextafter(width, math.inf)  # r - l on doubles may round down
    scale = width / eps
    budget = eps if mechanism == "laplace" else eps * eps / 2.0
    make = dp.m.make_laplace if mechanism == "laplace" else dp.m.make_gaussian
    for _ in range(64):  # the map rounds up: widen the scale ulp by ulp until it fits
        meas = make(*space, scale=scale)
        if meas.map(d_in) <= budget:
            return meas
        scale = math.nextafter(scale, math.inf)
    raise ValueError(f"OpenDP could not certify eps = {eps!r} for width {width!r}")


def private_release(x, l, r, eps, mechanism="laplace") -> float:
    """The release of one individual's value ``x`` through the published interval
    [l, r] at privacy level ``eps``, **for deployment**: T_l^r(x) plus OpenDP's noise
    of scale (r - l)/eps, drawn from the operating system's entropy (module docstring).
    Laplace: eps-DP; Gaussian: (eps^2 / 2)-zCDP.  Each call is a fresh draw."""
    x = check_finite_number("x", x)
    l, r = check_one_interval(l, r)
    eps = check_eps(eps)
    mechanism = check_mechanism(mechanism)
    if mechanism not in ("laplace", "gaussian"):
        raise ValueError(f"private_release has OpenDP samplers for 'laplace' and 'gaussian', "
                         f"not {mechanism!r}")
    return float(_measurement(mechanism, r - l, eps)(min(max(x, l), r)))


def seeded_release_for_simulation(x, l, r, eps, rng, mechanism="laplace") -> float:
    """The release of ``x`` through [l, r] with noise from the seeded numpy Generator
    ``rng``, **for simulation and reproduction only** (module docstring): the numbers of
    :class:`dpbook.privacy.population.Population` and :func:`dpbook.online.algorithm1.run_online`,
    bit for bit, given the same generator."""
    x = check_finite_number("x", x)
    return release_one(x, l, r, check_eps(eps), rng, check_mechanism(mechanism))
