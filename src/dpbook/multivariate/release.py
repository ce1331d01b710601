"""The release of a vector: clip each component to a box, add noise to each (issue 54).

Y = T_l^r(X) + b V, T_l^r clipping componentwise, V_j iid standard noise, and one
scale b = Delta / eps for every component, Delta = sum_j (r_j - l_j) for Laplace noise
(the L1 sensitivity of T_l^r: two inputs' clipped values differ by at most r_j - l_j in
each component).  So the release is eps-DP as in Theorem 2 (chapter 14 proves it), and
equals the composition of d one-dimensional releases at eps_j = eps (r_j - l_j)/Delta.
"""

from __future__ import annotations

import numpy as np

from dpbook.model.mechanisms import check_mechanism, clip, get_mechanism
from dpbook.validation import as_generator, check_eps, check_finite


def check_box(l, r, d=None):
    """A box [l, r]: two finite vectors of length d with l_j < r_j, as float arrays;
    ValueError naming the first component that is not."""
    l, r = check_finite("l", l), check_finite("r", r)
    if l.ndim != 1 or l.shape != r.shape or (d is not None and l.size != d):
        raise ValueError(f"a box needs l and r of length {d or 'd'}, got {l.shape} and {r.shape}")
    bad = np.flatnonzero(~(l < r))
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"the box is empty in component {j + 1}: l must be below r, "
                         f"got [{l[j]!r}, {r[j]!r}]")
    return np.array(l, float), np.array(r, float)


def box_scale(l, r, eps, mechanism="laplace"):
    """The noise scale b = Delta / eps of a box's release (Delta: the mechanism's
    sensitivity of the clip, L1 for Laplace)."""
    return get_mechanism(mechanism).sensitivity(l, r) / eps


def release_box(x, l, r, eps, rng, mechanism="laplace"):
    """One individual's release Y = T_l^r(x) + b V, b = Delta / eps, V_j iid (seeded:
    simulation; :func:`component_eps` gives the split for OpenDP's deployment noise)."""
    rng = as_generator(rng)
    eps = check_eps(eps)
    check_mechanism(mechanism)
    x = check_finite("x", x)
    l, r = check_box(l, r, x.shape[-1])
    return clip(x, l, r) + box_scale(l, r, eps, mechanism) * get_mechanism(mechanism).sample(
        rng, size=x.shape)


def component_eps(l, r, eps, mechanism="laplace"):
    """eps_j = eps (r_j - l_j) / Delta: the one-dimensional releases at these levels have
    the box's noise scale, so they compose to it (sum eps_j = eps for Laplace)."""
    return eps * (np.asarray(r, float) - np.asarray(l, float)) / get_mechanism(
        mechanism).sensitivity(l, r)
