"""Simulation-based calibration of the private posteriors (Cook, Gelman and Rubin 2006;
Talts et al. 2018), as Bernstein and Sheldon (2018, Section 4) check theirs.

Repeat: draw theta from the prior used for inference (Section 6: mu ~ N(0, 10^4),
sigma^2 ~ IG(1, 1), or the family's ``prior``), draw x_{1:n} from N(mu, sigma^2),
release them (eq. 10), compute the posterior, and record the posterior cdf of each
parameter at its true value (the probability integral transform, PIT; with posterior
draws, the normalised rank). For a correct posterior the PIT values are uniform on (0,
1), whatever the data. The check stays valid for an adaptive design: the intervals
depend only on earlier released values, so the design is ignorable and the posterior
given (y, l, r)_{1:n} is the one to test. Only the population
(:mod:`dpbook.privacy.population`) sees x; a replication hands the posterior (y, l, r,
eps).

This module holds one replication per method and the statistics of many (Kolmogorov-
Smirnov against the uniform, coverage of central credible intervals, simultaneous ECDF
bands of Sailynoja, Burkner and Vehtari 2022).  The methods:

* ``smc-adaptive``: Algorithm 1 with the online SMC (Algorithms 2-3) and Thompson
  sampling of eq. (11), the best interval (a*, b*) of eq. (13) for N(0, 1);
* ``smc-fixed``: the online SMC with the fixed interval [l, r];
* ``mhaar``: the batch MHAAR sampler on the releases through [l, r] (kept chain);

and, with the fixed interval [l, r] too (it must not depend on theta: an interval
centred at the true mu, as in Section 6, would tell the posterior where mu is):

* ``exact``: the exact posterior (5) on a grid (:func:`dpbook.posterior.exact_posterior`);
* ``naive``: the posterior that takes each released y for x (ignores clipping and noise);
* ``original-code``: the exact posterior with the noise scale of the authors' code
  mismatch (releases with Laplace scale (r - l)/(eps sqrt 2), analysed with scale
  (r - l)/eps; reproduction notes, item 1);

and the central model (chapter 11): the same people released by a curator as two noisy
clipped sums (:mod:`dpbook.privacy.central_curator`), the posterior on a grid
(:func:`dpbook.posterior.central_posterior`):

* ``central``: the sums clipped to [l, r], the noise-aware posterior;
* ``central-naive``: the same release, the posterior that ignores the noise;
* ``central-private``: [l, r] is only the public range; the curator spends a quarter of
  eps on the private 5% and 95% quantiles in it and clips to those.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

from dpbook.experiment.config import CENTRAL_METHODS
from dpbook.fisher import best_interval
from dpbook.mhaar import mhaar
from dpbook.model.families import as_family
from dpbook.model.prior import SECTION6
from dpbook.online.algorithm1 import run_online
from dpbook.online.methods import ONLINE_METHODS, TASKS
from dpbook.posterior import GridPosterior, central_posterior, exact_posterior
from dpbook.privacy.central_curator import family_release
from dpbook.privacy.policies import FixedPolicy
from dpbook.privacy.population import family_population
from dpbook.validation import as_generator, check_eps, check_interval, seed_sequence

# the online SMC's tasks (dpbook.online.methods: smc-adaptive, smc-fixed) and the batch ones
METHODS = (*(task for task, _, _ in ONLINE_METHODS["smc"].tasks), "mhaar", "exact", "naive",
           "original-code")
ALL_METHODS = METHODS + CENTRAL_METHODS
PARAMS = ("mu", "sigma")


def draw_theta(rng, size=None, prior=SECTION6):
    """(mu, sigma) from the prior, by default Section 6's: mu ~ N(0, 10^4),
    sigma^2 ~ IG(1, 1) (``prior``: a :class:`~dpbook.model.prior.LocationScalePrior`)."""
    theta = prior.sample(as_generator(rng), size)
    return (theta[0, 0], theta[0, 1]) if size is None else (theta[:, 0], theta[:, 1])


def naive_posterior(y, grid=201, prior=SECTION6):
    """The posterior of (mu, sigma) that treats each released y_t as x_t ~ N(mu, sigma^2)
    (the Section 6 prior or ``prior``, a grid uniform in mu and in log sigma): the
    baseline that ignores clipping and noise."""
    y = np.asarray(y, dtype=float)
    n, mean, sd = y.size, float(y.mean()), float(max(y.std(), 1e-12))
    half = 10.0 * sd / math.sqrt(n) + 1e-9
    mus = np.linspace(mean - half, mean + half, grid)
    log_sig = np.linspace(math.log(sd) - 6.0 / math.sqrt(n) - 1.0,
                          math.log(sd) + 6.0 / math.sqrt(n) + 1.0, grid)
    sig = np.exp(log_sig)
    squares = n * (mean - mus[:, None]) ** 2 + n * sd**2  # sum_t (y_t - mu)^2
    log_lik = -n * log_sig[None, :] - 0.5 * squares / sig[None, :] ** 2
    log_post = log_lik + prior.log_density(mus[:, None], sig[None, :])
    w_mu = np.full(grid, mus[1] - mus[0])
    w_sig = np.full(grid, log_sig[1] - log_sig[0]) * sig  # d sigma = sigma d log sigma
    for w in (w_mu, w_sig):
        w[[0, -1]] *= 0.5
    shift = float(np.max(log_post))
    log_z = shift + math.log(np.sum(np.exp(log_post - shift) * w_mu[:, None] * w_sig[None, :]))
    return GridPosterior(params=PARAMS, axes=[mus, sig], log_post=log_post - log_z,
                         log_evidence=log_z, edge=math.nan, weights=[w_mu, w_sig],
                         log_axes=(False, True))


def sample_cdf(draws, truth, weights=None):
    """P(theta < truth) under (weighted) posterior draws, ties counted half: the
    normalised rank of the truth among the draws."""
    draws = np.asarray(draws, dtype=float)
    w = np.full(draws.size, 1.0 / draws.size) if weights is None else \
        np.asarray(weights, dtype=float) / np.sum(weights)
    u = float(w[draws < truth].sum() + 0.5 * w[draws == truth].sum())
    return min(max(u, 0.0), 1.0)  # a sum of normalised weights may round past 1


@lru_cache(maxsize=16)
def _best_ab(eps, family, mechanism):
    # eq. (13) on the paper's 50 x 50 grid, for the family's base distribution
    best = best_interval(eps, family=family, mechanism=mechanism, method="exact")
    return best["a"], best["b"]


def check_study_model(method, family, mechanism):
    """The family (a location-scale one: the prior is defined on (m, c)) and mechanism
    of a calibration study; ValueError naming what is not supported."""
    family = as_family(family)
    if not family.location_scale:
        raise ValueError(f"calibration draws theta from a prior on (location, scale); "
                         f"the {family.name} family is not a location-scale family")
    if method == "naive" and family.name != "normal":
        raise ValueError("the naive posterior is the normal model's (y taken for x); "
                         f"it has no {family.name} version")
    if method == "original-code" and (family.name != "normal" or mechanism != "laplace"):
        raise ValueError("original-code is the authors' normal/Laplace likelihood")
    if method in CENTRAL_METHODS and (family.name != "normal" or mechanism != "laplace"):
        raise ValueError(f"{method} is the normal model's central release with Laplace "
                         f"noise; it has no {family.name}/{mechanism} version")
    return family


def replicate(method, eps, n, l, r, seed, grid=(61, 61), particles=500,
              mhaar_iters=10_000, family="normal", mechanism="laplace"):
    """One calibration replication: {"mu": PIT, "sigma": PIT, "mu_true", "sigma_true",
    "mu_iqr", "sigma_iqr"} (the last two: the posterior's interquartile ranges, to say
    how much the data taught; the parameter names are the family's).

    ``seed`` (an int or a SeedSequence) fixes everything: its three children draw theta,
    the population (data and privacy noise) and the sampler, so a replication is the
    same on any executor, and methods given the same seed see the same theta and data.
    theta is drawn from ``family.prior``, the prior every method infers with (Section
    6's unless the family came from ``with_prior``).  [l, r] is the fixed interval of
    every method but ``smc-adaptive``; ``grid`` sizes the exact posterior, ``particles``
    the SMC and ``mhaar_iters`` the MHAAR chain (the last 20% kept)."""
    if method not in ALL_METHODS:
        raise ValueError(f"method must be one of {', '.join(ALL_METHODS)}, got {method!r}")
    eps = check_eps(eps)
    l, r = check_interval(l, r)
    fam = check_study_model(method, family, mechanism)
    ss = seed_sequence(seed)
    theta_seed, data_seed, algo_seed = ss.spawn(3)
    mu, sigma = (float(v) for v in draw_theta(np.random.default_rng(theta_seed),
                                              prior=fam.prior))
    p_mu, p_sigma = fam.params
    truth = {f"{p_mu}_true": mu, f"{p_sigma}_true": sigma}

    def result(u, q):  # PITs and the quartiles (2, 2) of the posterior
        return {p_mu: float(u[0]), p_sigma: float(u[1]), **truth,
                f"{p_mu}_iqr": float(q[1, 0] - q[0, 0]),
                f"{p_sigma}_iqr": float(q[1, 1] - q[0, 1])}

    if method in CENTRAL_METHODS:  # the same people (data_seed), released by a curator
        # (no local population is made: its spawn would advance data_seed; family_release
        # takes data_seed's first children, as family_population does below)
        where = dict(bounds=(l, r)) if method == "central-private" else dict(interval=(l, r))
        release = family_release(fam, (mu, sigma), n, eps, seed=data_seed, **where)
        post = central_posterior(release, prior=fam.prior, naive=method == "central-naive",
                                 grid=grid[0])
        return result(post.cdf((mu, sigma)), post.quantile([0.25, 0.75]))
    eps_release = eps * math.sqrt(2.0) if method == "original-code" else eps
    population = family_population(fam, (mu, sigma), n, eps_release, seed=data_seed,
                                   mechanism=mechanism)
    if method in TASKS:
        online, policy_name, _ = TASKS[method]
        policy = FixedPolicy(l, r) if policy_name == "fixed" else \
            online.adaptive_policy(None, eps, fam, mechanism, best=_best_ab(eps, fam, mechanism))
        smc = run_online(population, policy, n, n_particles=particles, seed=algo_seed,
                         family=fam).smc
        return result([sample_cdf(smc.theta[:, j], v, smc.w) for j, v in
                       enumerate((mu, sigma))], smc.quantile([0.25, 0.75]))
    y = np.array([population.release(l, r) for _ in range(len(population))])
    if method == "mhaar":
        chain = mhaar(y, l, r, eps, family=fam, mechanism=mechanism, n_iter=mhaar_iters,
                      seed=algo_seed).kept()
        return result([sample_cdf(chain[:, j], v) for j, v in enumerate((mu, sigma))],
                      np.quantile(chain, [0.25, 0.75], axis=0))
    if method == "naive":
        post = naive_posterior(y, prior=fam.prior)
    else:
        kw = dict(grid=grid, tol=1e-3) if fam.name == "normal" and mechanism == "laplace" \
            else dict(grid=grid)
        post = exact_posterior(y, l, r, eps, family=fam, mechanism=mechanism, **kw)
    return result(post.cdf((mu, sigma)), post.quantile([0.25, 0.75]))


def summarize_pit(u):
    """Kolmogorov-Smirnov statistic and p-value of PIT values ``u`` against the uniform;
    the coverage of the central 50% and 90% credible intervals with its binomial
    standard error; and ``dispersion_z``, the z-score of the mean of (u - 1/2)^2 against
    its uniform value 1/12 (sd sqrt(1/80 - 1/144) per value): below 0 the posteriors
    are too wide, above 0 too narrow."""
    u = np.asarray(u, dtype=float)
    if u.ndim != 1 or u.size == 0 or not np.all((u >= 0) & (u <= 1)):
        raise ValueError("PIT values must be a non-empty 1-d array in [0, 1]")
    ks = stats.kstest(u, "uniform")
    out = {"ks_stat": float(ks.statistic), "ks_p": float(ks.pvalue), "reps": int(u.size)}
    spread = float(np.mean((u - 0.5) ** 2))
    out["dispersion_z"] = (spread - 1 / 12) / math.sqrt((1 / 80 - 1 / 144) / u.size)
    for level in (50, 90):
        out[f"coverage{level}"] = float((np.abs(u - 0.5) <= level / 200.0).mean())
        out[f"coverage{level}_se"] = math.sqrt(level / 100 * (1 - level / 100) / u.size)
    return out


def ecdf_band(reps, alpha=0.05, points=None, simulations=2000, rng=0):
    """Simultaneous 1 - alpha band for the ECDF of ``reps`` uniform values, evaluated at
    ``points`` (default: reps + 1 equally spaced): the "simulation" method of Sailynoja,
    Burkner and Vehtari (2022, Section 2.2).  Returns (points, lower, upper) as ECDF
    values."""
    rng = as_generator(rng)
    z = np.linspace(0.0, 1.0, reps + 1) if points is None else np.asarray(points, float)
    inner = z[(z > 0) & (z < 1)]
    counts = (np.sort(rng.uniform(size=(simulations, reps)), axis=1)[:, :, None]
              <= inner[None, None, :]).sum(axis=1)  # simulations x points
    cdf = stats.binom.cdf(counts, reps, inner)
    below = stats.binom.cdf(counts - 1, reps, inner)
    pointwise = 2.0 * np.minimum(cdf, 1.0 - below)  # two-sided pointwise p-values
    gamma = float(np.quantile(pointwise.min(axis=1), alpha))
    lower = np.interp(z, inner, stats.binom.ppf(gamma / 2, reps, inner) / reps)
    upper = np.interp(z, inner, stats.binom.ppf(1 - gamma / 2, reps, inner) / reps)
    lower[z <= 0], upper[z <= 0] = 0.0, 0.0
    lower[z >= 1], upper[z >= 1] = 1.0, 1.0
    return z, lower, upper
