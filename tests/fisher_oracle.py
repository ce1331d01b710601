"""The numpy reference of eq. (8) with Algorithm 4 for any family and mechanism: the
generic code the package ran before its one compiled engine (``dpbook.fisher.mc``),
kept here as the independent oracle the engine is checked against, statistically
(its random numbers are the family's and mechanism's own numpy samplers, not the
engine's keyed uniforms).

Draws, from one ``numpy.random.Generator``: M x's and M standard noises for the y's,
then the K importance samples shared by the M y's; each score by Algorithm 4 with
direct summation, se by the delta method of the engine's module docstring.
"""

import numpy as np

from dpbook.model.families import as_family
from dpbook.model.mechanisms import get_mechanism


def fisher_mc_oracle(l, r, eps, theta, family, mechanism, M, K, seed):
    """(F, se) of eq. (8), Algorithm 4 with K shared samples, numpy only."""
    fam, mech = as_family(family), get_mechanism(mechanism)
    rng = np.random.default_rng(seed)
    xy = np.asarray(fam.sample(rng, *theta, size=M), float)
    v = np.asarray(mech.sample(rng, size=M), float)
    x = np.asarray(fam.sample(rng, *theta, size=K), float)
    b = (r - l) / eps
    y = np.clip(xy, l, r) + b * v
    lw = mech.logpdf(y[:, None] - np.clip(x, l, r)[None, :], b)
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    om = w / w.sum(axis=1, keepdims=True)
    g = np.stack([np.broadcast_to(np.asarray(c, float), x.shape)
                  for c in fam.score(x, *theta)], axis=-1)              # (K, d)
    s = om @ g                                                           # (M, d)
    prods = s[:, :, None] * s[:, None, :]
    F = prods.mean(0)
    se_o = prods.std(0, ddof=1) / np.sqrt(M)
    IF = K * om[:, :, None] * (g[None] - s[:, None, :])                 # (M, K, d)
    H = (np.einsum("ma,mkb->kab", s, IF) + np.einsum("mka,mb->kab", IF, s)) / M
    return F, np.sqrt(se_o**2 + H.var(0, ddof=1) / K)
