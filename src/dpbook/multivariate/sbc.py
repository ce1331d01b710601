"""Simulation-based calibration of the two-dimensional latent SMC (chapter 14), as
chapter 8 checks the one-dimensional posteriors (Cook et al. 2006, Talts et al. 2018).

Each replication draws theta from the prior the SMC uses, X_{1:n} ~ N_d(mu, Sigma),
releases them through a box that does not depend on theta, runs the SMC and records the
probability integral transform u_p = P(theta'_p < theta_p | Y_{1:n}) of each parameter
(the weighted particles' cdf at the truth).  A correct sampler gives uniform u's.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from dpbook.multivariate.release import check_box, release_box
from dpbook.smc import SMC
from dpbook.validation import check_count, check_eps, seed_sequence


def pit(post, theta):
    """u_p = sum_i w_i [theta_i,p < theta_p] for each parameter p of a particle posterior."""
    return (post.w[:, None] * (post.theta < np.asarray(theta, float))).sum(axis=0)


def sbc(family, eps, box, n=30, reps=200, n_particles=300, seed=0, mechanism="laplace",
        assumed_eps=None):
    """The PITs of ``reps`` replications, an array (reps, dim), for ``family`` (its prior
    is the one drawn from) with releases through the fixed ``box`` = (l, r) at ``eps``
    (``assumed_eps``: the level the SMC assumes, a wrong one for a negative control)."""
    eps, l, r = check_eps(eps), *check_box(*box)
    assumed = eps if assumed_eps is None else check_eps(assumed_eps)
    reps, n = check_count("reps", reps), check_count("n", n)
    out = np.empty((reps, family.dim))
    for k, ss in enumerate(seed_sequence(seed).spawn(reps)):
        prior_ss, data_ss, smc_ss = ss.spawn(3)
        theta = family.sample_prior(np.random.default_rng(prior_ss), 1)[0]
        rng = np.random.default_rng(data_ss)
        x = family.sample(rng, *theta, size=n)
        smc = SMC(assumed, family, mechanism, n_particles=n_particles, n_max=n, seed=smc_ss)
        for xt in x:
            smc.update(release_box(xt, l, r, eps, rng, mechanism), l, r)
        out[k] = pit(smc, theta)
    return out


def uniformity(u, params):
    """{param: KS p-value of its PITs against U(0, 1)}."""
    return {p: float(stats.kstest(u[:, j], "uniform").pvalue) for j, p in enumerate(params)}
