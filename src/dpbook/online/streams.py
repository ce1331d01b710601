"""Long streams (chapters 9 and 10): online runs of Algorithm 1 with a clock, and a
stream of a user's own values.

The online posteriors are named in :mod:`dpbook.online.methods` (``smc``,
``smc-subset``, ``smc-marginal``, ``online-gradient``).  :func:`timed_run` runs one of
them on a stream and records, at given checkpoints t, the wall and CPU seconds spent so
far and the posterior's quartiles (the estimate for the online gradient).  An online
method's cost for a stream of length t is its time at t, so one run of length n gives
the whole cost curve up to n.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpbook.online.algorithm1 import OnlineRun, run_online
from dpbook.online.gradient import OnlineGradient
from dpbook.online.methods import get_method, stream_policy
from dpbook.privacy.curator import absorb
from dpbook.validation import check_count, seed_sequence, unspawned

QUARTILES = (0.25, 0.5, 0.75)


class _Clock:
    """Stands in for an online posterior in Algorithm 1's loop; after release t, for t
    in ``checkpoints``, it records the seconds since the start and the quartiles."""

    def __init__(self, posterior, checkpoints):
        self.posterior = posterior
        self.checkpoints = set(checkpoints)
        self.rows = []
        self.count = 0
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def __getattr__(self, name):  # thompson_draw, summary, history, ...
        return getattr(self.posterior, name)

    def update(self, y, l, r):
        self.posterior.update(y, l, r)
        self.count += 1
        self._tick()

    def update_many(self, y, l, r):
        """The posterior's ``update_many`` (or ``update`` in turn) in pieces that end at
        the checkpoints."""
        start = 0
        ends = sorted(c - self.count for c in self.checkpoints if 0 < c - self.count < len(y))
        for end in [*ends, len(y)]:
            absorb(self.posterior, y[start:end], l[start:end], r[start:end])
            self.count += end - start
            start = end
            self._tick()

    def _tick(self):
        if self.count in self.checkpoints:
            row = {"t": self.count, "wall_s": time.perf_counter() - self.wall,
                   "cpu_s": time.process_time() - self.cpu}
            self.rows.append(row | quartiles(self.posterior))


def quartiles(posterior) -> dict:
    """{"mu_q25": ..., "mu_q50": ..., ...} of an online posterior; the online gradient's
    estimate for all three (it has no posterior)."""
    params = posterior.params
    if isinstance(posterior, OnlineGradient):
        q = np.tile(np.asarray(posterior.theta, float), (len(QUARTILES), 1))
    else:
        q = np.atleast_2d(posterior.quantile(list(QUARTILES)))
    return {f"{p}_q{round(100 * level)}": float(q[i, j])
            for j, p in enumerate(params) for i, level in enumerate(QUARTILES)}


@dataclass
class TimedRun:
    """An online run (releases and the posterior at the end) and its clock: one row per
    checkpoint t with ``wall_s``, ``cpu_s`` and the quartiles ``<param>_q25/q50/q75``."""
    run: OnlineRun
    clock: pd.DataFrame


def timed_run(method, population, n, policy="adaptive", checkpoints=None,
              n_particles=1000, subset=None, family=None, seed=0, batch=1) -> TimedRun:
    """Algorithm 1 for n individuals of ``population`` with the online posterior
    ``method`` (:mod:`~dpbook.online.methods`) and the interval ``policy``
    (:func:`stream_policy`), timed at ``checkpoints`` (default: 1, 2 and 5 times the
    powers of ten up to n, and n), through :func:`dpbook.online.algorithm1.run_online`.
    ``seed`` (an int or a SeedSequence, whose first two children are used) drives the
    posterior and the policy's draws, as in ``run_online``; the privacy noise is the
    population's.  ``batch``: individuals per published interval (``run_online``)."""
    n = check_count("n", n)
    if checkpoints is None:
        checkpoints = [k * 10**e for e in range(int(math.log10(n)) + 1) for k in (1, 2, 5)]
        checkpoints = sorted({c for c in checkpoints if c <= n} | {n})
    ss = seed_sequence(seed)

    def fresh():  # ss before any spawn: run_online spawns (posterior, policy) from it
        return unspawned(ss)

    mechanism = getattr(population, "mechanism", "laplace")
    posterior = get_method(method).build(population.eps, family, mechanism,
                                         n_particles=n_particles, n_max=n, subset=subset,
                                         seed=fresh().spawn(2)[0])
    policy = stream_policy(policy, method, posterior, population.eps, family, mechanism)
    clock = _Clock(posterior, checkpoints)
    # Algorithm 1 itself (the population's side of the privacy boundary) with the clock
    # standing in for the posterior
    run = run_online(population, policy, n, seed=fresh(), posterior=clock, batch=batch)
    frame = pd.DataFrame(clock.rows).assign(method=method)
    return TimedRun(OnlineRun(y=run.y, l=run.l, r=run.r, smc=posterior), frame)


def cost_exponents(clock: pd.DataFrame, by=("method",), since=None, column="wall_s"):
    """The exponent of ``column`` against t, fitted by least squares on the log-log
    scale to the checkpoints t >= ``since`` of each group of ``by`` (default:
    t >= min(1000, t_max / 10), at least the last decade): time ~ t^slope.  Returns a
    frame with ``by``, ``slope``, ``n_max`` (the last checkpoint) and ``at_n_max`` (the
    time there)."""
    rows = []
    for key, g in clock.groupby(list(by)):
        key = key if isinstance(key, tuple) else (key,)
        start = min(1000, g.t.max() / 10) if since is None else since
        g = g[(g.t >= start) & (g[column] > 0)]
        slope = np.polyfit(np.log(g.t), np.log(g[column]), 1)[0] if len(g) > 1 else math.nan
        last = g.loc[g.t.idxmax()] if len(g) else None
        rows.append(dict(zip(by, key), slope=slope,
                         n_max=int(last.t) if last is not None else 0,
                         at_n_max=float(last[column]) if last is not None else math.nan))
    return pd.DataFrame(rows)


def extrapolate(exponents: pd.DataFrame, n) -> pd.Series:
    """The time each row of :func:`cost_exponents` predicts at stream length n, from
    its last measured time and its fitted exponent."""
    return exponents.at_n_max * (n / exponents.n_max) ** exponents.slope


def quartile_paths(clock: pd.DataFrame, params=("mu", "sigma")) -> pd.DataFrame:
    """The clock's quartiles in long form: one row per (checkpoint, param) with
    ``q25``, ``q50``, ``q75`` and the clock's other columns."""
    keep = [c for c in clock.columns if not any(c.startswith(f"{p}_q") for p in params)]
    return pd.concat([clock[keep].assign(param=p, **{
        q: clock[f"{p}_{q}"] for q in ("q25", "q50", "q75")}) for p in params],
        ignore_index=True)


def against_exact(run: TimedRun, at, eps, family=None, mechanism="laplace",
                  **exact_kw) -> pd.DataFrame:
    """The run's quartiles at the checkpoints ``at`` against those of the exact
    posterior (eq. 5, :func:`dpbook.posterior.exact_posterior`) of the same releases
    y_{1:t}: one row per (t, param, quartile) with ``value``, ``exact``, the exact
    posterior's interquartile range ``exact_iqr`` and ``error`` = (value - exact) /
    exact_iqr."""
    from dpbook.posterior import exact_posterior

    rows = []
    clock = run.clock.set_index("t")
    for t in at:
        if t not in clock.index:
            raise ValueError(f"t = {t} is not one of the run's checkpoints")
        y, l, r = (v[:t] for v in (run.run.y, run.run.l, run.run.r))
        exact = exact_posterior(y, l, r, eps, family=family, mechanism=mechanism, **exact_kw)
        q = np.atleast_2d(exact.quantile(list(QUARTILES)))
        for j, p in enumerate(exact.params):
            iqr = q[2, j] - q[0, j]
            for i, level in enumerate(QUARTILES):
                name = f"q{round(100 * level)}"
                value = float(clock.at[t, f"{p}_{name}"])
                rows.append(dict(t=t, param=p, quartile=name, value=value,
                                 exact=float(q[i, j]), exact_iqr=float(iqr),
                                 error=(value - q[i, j]) / iqr))
    return pd.DataFrame(rows).assign(method=run.clock.method.iat[0])


def _stream_family(family, policy):
    """The family of a stream; the adaptive policy needs a location-scale one."""
    from dpbook.model.families import as_family

    fam = as_family(family)
    if isinstance(policy, str) and policy == "adaptive" and not (
            fam.location_scale or getattr(fam, "event_shape", ())):
        raise ValueError(f"the adaptive policy of a stream needs a location-scale family, "
                         f"not {fam.name}: give a fixed interval")
    return fam


def _curator_parts(method, policy, eps, fam, mechanism, n_particles, n_max, subset, seed):
    """The online posterior (from the first child of ``seed``) and the interval policy
    of a stream, and the second child, which Algorithm 1 goes on with."""
    post_ss, online_ss = seed_sequence(seed).spawn(2)
    posterior = get_method(method).build(eps, fam, mechanism, n_particles=n_particles,
                                         n_max=n_max, subset=subset, seed=post_ss)
    return posterior, stream_policy(policy, method, posterior, eps, fam, mechanism), online_ss


def make_curator(eps, method="smc-marginal", policy="adaptive", family=None,
                 mechanism="laplace", n_particles=1000, n_max=None, subset=None, seed=0):
    """The curator of a deployment (:class:`dpbook.privacy.curator.Curator`): the online
    posterior ``method`` (:mod:`~dpbook.online.methods`; ``n_max``, the stream's length, for
    the latent SMC) and the interval ``policy`` (:func:`stream_policy`).  ``seed`` (an
    int or a SeedSequence) gives the posterior's and the policy's draws as
    :func:`run_stream` does from its third child of the seed: a curator made with
    ``seed=SeedSequence(S).spawn(3)[2]`` publishes the intervals and ends with the
    posterior of ``run_stream(..., seed=S)`` when given the same releases."""
    from dpbook.privacy.curator import Curator

    fam = _stream_family(family, policy)
    posterior, rule, online_ss = _curator_parts(method, policy, eps, fam, mechanism,
                                                n_particles, n_max, subset, seed)
    # run_online spawns (its own posterior's seed, the policy's) from its seed
    return Curator(posterior, rule, np.random.default_rng(online_ss.spawn(2)[1]))


def run_stream(values, eps, method="smc-marginal", policy="adaptive", family=None,
               mechanism="laplace", n_particles=1000, subset=None, seed=0, shuffle=False,
               progress=False, deploy=False, batch=1):
    """Algorithm 1 over a column of sensitive values (``dpbook stream``): each value, in
    the given order (or a random one, ``shuffle``), is released once through the
    interval the ``policy`` asks for, and the online posterior ``method``
    (:mod:`~dpbook.online.methods`) absorbs the release.  Returns ``(run, summary)``: the
    :class:`~dpbook.online.algorithm1.OnlineRun` (the releases y, l, r and the posterior)
    and {"n", "eps", "method", "policy", "family", "mechanism", "quartiles"} with the
    final posterior's quartiles per parameter (the online gradient's estimate for all
    three).

    The values go into the population (:class:`dpbook.privacy.population.Population`),
    the only object that sees them; the posterior and the policy see the releases.
    ``seed`` fixes the order (with ``shuffle``), the privacy noise and the algorithm's
    draws, three independent streams.  ``progress``: show a bar on stderr.  ``deploy``:
    draw the privacy noise with OpenDP's floating-point-safe samplers from the operating
    system's entropy (:func:`dpbook.privacy.individual.private_release`), for releases
    that will be published; the seed then fixes the order and the algorithm's draws
    only, and the run cannot be repeated.  ``batch``: individuals per published
    interval (:func:`dpbook.online.algorithm1.run_online`).

    A family with ``event_shape`` (d,) (:class:`dpbook.multivariate.mvnormal.
    MultivariateNormal`) takes an (n, d) array of values, one row per individual,
    released through a box: ``policy`` "adaptive" (the box policy of
    :func:`~dpbook.online.methods.standard_box`) or (l_vec, r_vec); method "smc" and
    batch 1 only.
    """
    from dpbook.privacy.population import Population
    from dpbook.validation import check_eps, check_finite

    eps = check_eps(eps)
    fam = _stream_family(family, policy)
    x, shape = check_finite("values", values), tuple(getattr(fam, "event_shape", ()))
    if shape:  # a vector per individual, released through a box (issue 54)
        if x.ndim != 2 or x.shape[1:] != shape:
            raise ValueError(f"the {fam.describe()} model needs an (n, {shape[0]}) array "
                             f"of values, got shape {x.shape}")
        if method != "smc" or batch != 1:
            raise ValueError("a vector of values per individual runs with method 'smc' "
                             "and batch 1 only")
    else:
        x = x.ravel()
    if x.size == 0:
        raise ValueError("no values to release")
    if fam.discrete:  # a count of 2.5 or -3 would be released and read as another count
        with np.errstate(all="ignore"):
            outside = np.isneginf(fam.logpdf(x, *fam.default_theta()))
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise ValueError(f"value {i + 1} ({x[i]:g}) is outside the support of the "
                             f"{fam.name} family")
    order_ss, noise_ss, algo_ss = seed_sequence(seed).spawn(3)
    if shuffle:
        x = x[np.random.default_rng(order_ss).permutation(len(x))]
    population = Population(x, eps, None if deploy else np.random.default_rng(noise_ss),
                            mechanism=mechanism)
    posterior, rule, online_ss = _curator_parts(method, policy, eps, fam, mechanism,
                                                n_particles, len(x), subset, algo_ss)
    from tqdm import tqdm

    with tqdm(total=len(x), unit="release", desc=method, leave=False, delay=2.0,
              dynamic_ncols=True, smoothing=0.1, disable=not progress) as bar:
        run = run_online(population, rule, len(x), seed=online_ss, family=fam,
                         posterior=posterior, progress=bar if progress else None, batch=batch)
    summary = {"n": len(x), "eps": eps, "method": method,
               "policy": "adaptive" if isinstance(policy, str) else
               ("fixed" if isinstance(policy, (tuple, list)) else type(policy).__name__),
               "family": fam.describe(), "mechanism": str(mechanism),
               "quartiles": quartiles(run.smc),
               "noise": "opendp" if deploy else "seeded (simulation)", "batch": int(batch)}
    if isinstance(policy, (tuple, list)):
        summary["interval"] = np.asarray(policy, float).T.tolist()  # [l, r]; a box: [l_j, r_j]
    return run, summary


def release_limit(values, l, r, eps, start=None, points=4001):
    """Where the normal model's private posterior goes under the fixed interval [l, r]
    when the values are not normal: theta* = (mu*, sigma*) maximising E[log
    p^eps_{l,r}(Y | theta)], Y = T_l^r(X) + (r - l)/eps V with X drawn from the
    ``values`` (their empirical distribution) and V the Laplace noise, i.e. minimising
    the Kullback-Leibler divergence from the releases' true distribution to the model's
    (the posterior of a misspecified model concentrates there, Berk 1966; Kleijn and van
    der Vaart 2012).  The expectation is a trapezoid sum over ``points`` values of y on
    [l - 25 b, r + 25 b] of the true release density (a mixture of Laplace densities
    at the clipped values) times the model's log density (closed form,
    :mod:`dpbook.likelihood.normal_laplace`); the maximum is found with the exact
    score (BFGS on (mu, log sigma)) from ``start`` (default: the clipped values' mean
    and sd).  This is an oracle's computation, from the sensitive values themselves:
    for analysing the method, never part of a release.  Returns (mu*, sigma*)."""
    from scipy.optimize import minimize

    from dpbook.likelihood.normal_laplace import logp_and_score
    from dpbook.validation import check_eps, check_one_interval

    l, r = check_one_interval(l, r)
    eps = check_eps(eps)
    c, w = np.unique(np.clip(check_finite_values(values), l, r), return_counts=True)
    b = (r - l) / eps
    ys = np.linspace(l - 25 * b, r + 25 * b, check_count("points", points, minimum=3))
    q = np.zeros_like(ys)  # the true density of a release, sum_c w_c Laplace(y - c; b)
    for start_c in range(0, c.size, 256):
        cc, ww = c[start_c:start_c + 256], w[start_c:start_c + 256]
        q += (ww[:, None] * np.exp(-np.abs(ys[None, :] - cc[:, None]) / b)).sum(axis=0)
    q /= 2 * b * w.sum()
    weight = q * np.gradient(ys)  # trapezoid weights (interior spacing, halved ends)
    weight[[0, -1]] *= 0.5
    if start is None:
        mean = float(np.average(c, weights=w))
        start = (mean, max(float(np.sqrt(np.average((c - mean) ** 2, weights=w))),
                           1e-3 * (r - l)))

    def objective(p):
        sigma = math.exp(p[1])
        lp, s = logp_and_score(ys, l, r, eps, p[0], sigma)
        return -float(weight @ lp), -np.array([weight @ s[:, 0], (weight @ s[:, 1]) * sigma])

    res = minimize(objective, [float(start[0]), math.log(float(start[1]))], jac=True,
                   method="BFGS", options={"gtol": 1e-9})
    return float(res.x[0]), float(math.exp(res.x[1]))


def adaptive_limit(values, a, b, eps, start=None, tol=1e-8, max_iter=500, points=4001):
    """Where the normal model's private posterior goes under the adaptive policy
    l = m + a c, r = m + b c (eq. 11) when the values are not normal: as the posterior
    concentrates, the Thompson draws and with them the intervals settle, so the limit
    is a fixed point theta = :func:`release_limit` (values, mu + a sigma, mu + b sigma)
    at theta itself.  Found by iterating that map on (mu / sd, log sigma) from ``start``
    (default: the values' mean and sd), with Aitken's delta-squared jump after every
    two steps where the steps shrink geometrically, until a step moves less than
    ``tol``.  It
    depends on the values' whole distribution, on eps and on (a, b), not on the prior or
    the order.  An oracle's computation (see :func:`release_limit`).  Returns
    (mu, sigma)."""
    x = check_finite_values(values)
    theta0 = (float(x.mean()), float(x.std())) if start is None else tuple(map(float, start))
    scale = theta0[1]

    def step(p):
        mu, sigma = p[0] * scale, math.exp(p[1]) * scale
        new = release_limit(x, mu + a * sigma, mu + b * sigma, eps, start=(mu, sigma),
                            points=points)
        return np.array([new[0] / scale, math.log(new[1] / scale)])

    p = np.array([theta0[0] / scale, 0.0])
    for _ in range(check_count("max_iter", max_iter)):
        p1 = step(p)
        p2 = step(p1)
        d1, d2 = p1 - p, p2 - p1
        if np.abs(d2).max() < tol:
            p = p2
            break
        # a linearly converging iteration moves by a geometric series: jump to its sum
        # (Aitken's delta-squared, per coordinate, only where the steps shrink steadily)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(d1 != 0, d2 / d1, 0.0)
        jump = np.where((ratio > 0) & (ratio < 0.99), d2 * ratio / (1 - ratio), 0.0)
        p = p2 + np.clip(jump, -1.0, 1.0)
    else:
        raise ValueError(f"the adaptive limit did not settle in {max_iter} steps")
    return float(p[0] * scale), float(math.exp(p[1]) * scale)


def check_finite_values(values) -> np.ndarray:
    """``values`` as a flat float array, finite and not empty (ValueError otherwise)."""
    from dpbook.validation import check_finite

    x = check_finite("values", values).ravel()
    if x.size == 0:
        raise ValueError("no values")
    return x
