"""Algorithm 1: differentially private online learning with adaptive queries.

For t = 1, ..., n: the policy chooses s_t = [l_t, r_t] from the current estimation
system (eq. 4); the population releases Y_t = T(X_t) + (r_t - l_t) V_t (eq. 10,
the only place the sensitive X_t is touched); the SMC absorbs (Y_t, l_t, r_t)
(eq. 3, Algorithm 2).

Batched (``batch`` = B > 1, a departure from the paper for deployments, where devices
fetch the current interval and report later): the policy chooses one interval for the
next B individuals, and the posterior absorbs their B releases before the next
interval is chosen.  B = 1 is Algorithm 1 as written, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpbook.privacy.curator import Curator
from dpbook.privacy.population import Population
from dpbook.smc import SMC
from dpbook.smc.resample_move import ParticlePosterior, check_particles, check_reliability
from dpbook.validation import check_count, seed_sequence

STATIC_BLOCK = 4096  # individuals per publication of a static (fixed) interval


@dataclass
class OnlineRun:
    """The released data and the SMC that learnt from them."""

    y: np.ndarray
    l: np.ndarray
    r: np.ndarray
    smc: SMC


def run_online(population: Population, policy, n, n_particles=1000, seed=0, every=20,
               family=None, posterior=None, subset=None, eps=None, progress=None,
               batch=1):
    """Run Algorithm 1 for n individuals; return the released (y, l, r) and the SMC.

    ``seed`` (int or SeedSequence) drives the SMC and the Thompson draws; the privacy
    noise belongs to the population.  ``family`` is the model {P_theta} the SMC fits
    (None: normal); the SMC (:class:`dpbook.smc.SMC`) uses the population's mechanism
    (Laplace if it names none).  ``posterior`` replaces the SMC by another online
    posterior with ``update(y, l, r)`` and ``thompson_draw(rng)`` (for example
    :class:`dpbook.online.ibis.MarginalSMC`, built for the population's eps and mechanism);
    the policy's draws still come from ``seed``.  At the end, a particle posterior is
    checked against cheap reference points (``smc.lost``, and a one-line
    ReliabilityWarning when it has not found the posterior: :mod:`dpbook.diagnostics`).
    ``subset``: latent values the SMC moves per step (subset rejuvenation,
    :class:`dpbook.smc.SMC`; None: all).  ``eps``: the privacy level the SMC assumes
    (default the population's; another reproduces an analysis with the wrong noise
    scale, as the authors' code's).  ``progress``: an
    object whose ``update(k)`` is called after each k releases (a tqdm bar, say).
    ``batch``: individuals per published interval (module docstring; the last batch
    may be smaller).
    """
    if posterior is not None and subset is not None:
        raise ValueError("subset is an option of the latent SMC; give it to the posterior "
                         "object passed as posterior= instead")
    batch = check_count("batch", batch)
    ss = seed_sequence(seed)
    smc_ss, policy_ss = ss.spawn(2)
    mechanism = getattr(population, "mechanism", "laplace")
    smc = posterior if posterior is not None else SMC(
        population.eps if eps is None else eps, family, mechanism, n_particles=n_particles,
        n_max=n, seed=smc_ss, every=every, subset=subset)
    # the curator (the posterior and the policy) and the individuals (the population)
    # meet only through the interval and the release, as in a deployment
    # (dpbook.privacy.curator, dpbook.privacy.individual)
    curator = Curator(smc, policy, np.random.default_rng(policy_ss))
    # a static policy's interval (the fixed one) is the same for everyone: published
    # for a block of individuals, it changes no number and lets a posterior absorb
    # the block in one call
    # (a box's releases, dpbook.multivariate, are taken one by one)
    static = getattr(policy, "static", False) and not getattr(getattr(smc, "family", None),
                                                                  "event_shape", ())
    step = max(batch, STATIC_BLOCK) if static else batch
    for start in range(0, n, step):
        k = min(step, n - start)
        l, r = curator.publish(k)
        if k == 1:
            curator.take(population.release(l, r), l, r)
        else:
            curator.take_many([population.release(l, r) for _ in range(k)], [l] * k, [r] * k)
        if progress is not None:
            progress.update(k)
    y, l, r = curator.releases()
    if n > 0:  # a run beyond its diagnostic's threshold says so (smc.reliability)
        check_reliability(smc, "the online SMC", stacklevel=3)
    if isinstance(smc, ParticlePosterior) and n > 0:
        # particles that never found the posterior say so (one line; smc.lost)
        check_particles(smc, y, l, r, "the online SMC", stacklevel=3)
    return OnlineRun(y=y, l=l, r=r, smc=smc)
