"""Resampling (Algorithm 2, step 1) and the effective sample size.

Systematic resampling (Carpenter, Clifford & Fearnhead 1999; Chopin & Papaspiliopoulos
2020, Section 9.6): one uniform U, and ancestor i is the first index j with
N (w_1 + ... + w_j) >= U + i.  Two implementations of the same rule, one per random
stream: :func:`systematic` draws U from a numpy Generator (the generic SMC);
:func:`systematic_keyed` draws it from the counter-keyed stream (key, purpose, t) of
:mod:`dpbook.rng` (the compiled SMC, bit-identical for any number of threads).  They
accumulate the weights in a different order, so their indices can differ where a
cumulative sum lands within rounding of a grid point.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from dpbook import rng as _rng


def systematic(rng: np.random.Generator, w):
    """Ancestor indices for normalised weights w, with one uniform from ``rng``."""
    n = w.shape[0]
    pos = rng.random() + np.arange(n)
    idx = np.searchsorted(np.cumsum(w) * n, pos, side="left")
    return np.minimum(idx, n - 1)


@njit(cache=True)
def systematic_keyed(key, purpose, t, w, out):
    """Ancestor indices (into ``out``) for normalised weights w; the uniform is the first
    of the counter-keyed stream (key, purpose, t)."""
    n = w.shape[0]
    s = _rng.stream_key(key, purpose, t)
    s, u = _rng.uniform(s)
    cum = w[0] * n
    j = 0
    for i in range(n):
        pos = u + i
        while cum < pos and j < n - 1:
            j += 1
            cum += w[j] * n
        out[i] = j


def thompson_index(w, rng: np.random.Generator) -> int:
    """Step 1 of Section 5.1: the index i with probability w^(i) (normalised weights).

    The inverse cdf with one ``rng.random()``, which is what ``rng.choice(len(w), p=w)``
    computes, bit for bit and with the same draw, without its checks of w (the online
    loop calls it once per individual).
    """
    cdf = w.cumsum()
    cdf /= cdf[-1]
    return int(cdf.searchsorted(rng.random(), side="right"))


def ess(w) -> float:
    """Effective sample size 1 / sum w_i^2 of normalised weights (Kong, Liu & Wong 1994)."""
    return float(1.0 / (w @ w))
