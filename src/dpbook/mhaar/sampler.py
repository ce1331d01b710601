"""MHAAR, the batch baseline of Section 6: its entry point, result and pilot steps.

:func:`mhaar` runs Alparslan & Yildirim (2022)'s printed box "Algorithm 8" (after
Andrieu, Yildirim, Doucet & Chopin 2020, Section 3) for p(theta | y_{1:n}) with the
releases Y_t = clip(X_t, l_t, r_t) + b_t V_t: the paper's kernel for the normal family
with the Laplace mechanism (:mod:`dpbook.mhaar.paper_chain`), the engine for any
other model (:mod:`dpbook.mhaar.compiled_chain`, where the algorithm is stated).  Both return
an :class:`MHAARResult`; here also its Monte Carlo diagnostics (batch means, Geyer's
effective sample size) and the step pilot both use.

Step sizes and adaptation.  From iteration m0 = floor(0.1 n_iter) on, after iteration m
(1-based, m > m0), log s_j += m^(-0.6) (a_m - 0.1) for every coordinate j, a_m = 1 if
iteration m accepted: one increment for every coordinate, so the ratios of the initial
steps are kept.  The engine's initial steps (:func:`pilot_steps`) are s_j = 1/sqrt(n
I_jj), I the per-observation Fisher information at theta_0 of a Gaussian approximation
of the released value, Y ~ N(E[T(X)], Var[T(X)] + Var[b V]) with T = clip to [l_t, r_t]:

    I_jj = (d E[T(X)] / d phi_j)^2 / v + (d Var[T(X)] / d phi_j)^2 / (2 v^2),
    v = Var[T(X)] + mean_t Var[b_t V],

the moments and their derivatives (central differences, h = 0.05 in log coordinates and
0.05 sd(X) in the others) estimated from about 2000 latent draws held fixed (common random
numbers).  For the normal family without clipping or noise this gives s_mu = sigma/sqrt(n)
and s_log_sigma = 1/sqrt(2n), the posterior sds.  Steps are capped at 1 in log coordinates
and at sd(y) in the others; a coordinate with no estimated information (e.g. all draws
clipped) gets the cap / sqrt(n).  The paper's kernel starts from Section 6's steps
instead (under other priors, from this pilot combined with the prior's precision).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpbook.backends import backend, engine
from dpbook.model.families import as_family
from dpbook.validation import (
    check_count,
    check_eps,
    check_memory,
    check_observations,
    check_seed,
)

TARGET_ACCEPT = 0.1  # the Robbins-Monro rule of the module docstring
ADAPT_EXPONENT = 0.6
ADAPT_START_FRACTION = 0.1

PILOT_DRAWS = 2000  # latent draws of the step pilot
PILOT_H = 0.05  # central-difference step of the pilot (log coordinates; x sd(X) otherwise)
MAX_LOG_STEP = 1.0  # initial steps of log coordinates at most this (a factor e per move)


# ---------------------------------------------------------------- result


def batch_means_se(x, n_batches=50):
    """Monte Carlo standard error of mean(x) for a correlated chain, by batch means.

    The chain is cut into ``n_batches`` consecutive batches of equal length (the first
    len(x) mod n_batches values are dropped); the standard error is
    sd(batch means) / sqrt(n_batches).
    """
    x = np.asarray(x, dtype=float)
    n_batches = check_count("number of batches", n_batches, 2)
    size = x.size // n_batches
    if size < 1:
        raise ValueError(f"need at least {n_batches} samples for {n_batches} batches")
    means = x[x.size - size * n_batches:].reshape(n_batches, size).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(n_batches))


def effective_sample_size(x):
    """Effective sample size n / tau of a chain x, tau = -1 + 2 sum_k Gamma_k with
    Gamma_k = rho_2k + rho_2k+1 the paired autocorrelations (FFT) summed while positive
    and made non-increasing (Geyer's initial monotone sequence, 1992).  0 for a chain
    that never moved."""
    x = np.asarray(x, dtype=float)
    n = x.size
    x = x - x.mean()
    if n < 4 or not np.any(x):
        return 0.0
    f = np.fft.rfft(x, 2 * n)
    acov = np.fft.irfft(f * np.conj(f), 2 * n)[:n] / n
    rho = acov / acov[0]
    m = (n - 1) // 2
    pairs = rho[0:2 * m:2] + rho[1:2 * m:2]
    tau, prev = -1.0, math.inf
    for g in pairs:
        if g <= 0:
            break
        prev = min(g, prev)
        tau += 2.0 * prev
    return float(n / max(tau, 1.0 / n))


@dataclass
class MHAARResult:
    """Output of :func:`mhaar` (any family, either backend): the chain of theta and the
    tuning.

    ``samples[m]`` is theta after iteration m + 1 (columns named by ``params``);
    ``accepted[m]`` whether that iteration accepted; ``steps[m]`` the random-walk steps
    after it, in the coordinates named by ``step_coords`` (the engine: log for
    positive parameters; the compiled normal/Laplace one: mu and sigma^2).  Estimates
    use the last ``n_kept`` samples (``burn_fraction`` of the chain discarded).
    """

    params: tuple
    samples: np.ndarray
    accepted: np.ndarray
    steps: np.ndarray
    theta0: np.ndarray
    burn_fraction: float
    n_aux: int
    eps: float
    seed: object
    family: str = ""
    mechanism: str = ""
    seconds: float = field(default=0.0, compare=False)
    step_coords: tuple = ()
    n_parallel: int = 0  # compiled backend: iterations run with blocks in parallel
    # None, or where the chain stayed when it has not found the posterior
    # (dpbook.diagnostics.lost_posterior: a reference point far more probable than the
    # kept samples' median)
    lost: object = field(default=None, compare=False)
    # None, or why the chain did not start at the moment guess (:func:`mhaar`: the
    # posterior_gap of the guess, naming the reference point it started at)
    moved_start: object = field(default=None, compare=False)

    @property
    def n_iter(self) -> int:
        return int(self.samples.shape[0])

    @property
    def n_kept(self) -> int:
        return max(1, self.n_iter - int(math.floor(self.burn_fraction * self.n_iter)))

    def kept(self) -> np.ndarray:
        """The kept samples, (n_kept, d)."""
        return self.samples[self.n_iter - self.n_kept:]

    @property
    def acceptance(self) -> float:
        """Acceptance rate over all iterations."""
        return float(self.accepted.mean())

    @property
    def acceptance_kept(self) -> float:
        return float(self.accepted[self.n_iter - self.n_kept:].mean())

    @property
    def final_steps(self) -> np.ndarray:
        return self.steps[-1].copy()

    def mean(self) -> np.ndarray:
        """The estimate: posterior means over the kept samples, (d,)."""
        return self.kept().mean(axis=0)

    def sd(self) -> np.ndarray:
        return self.kept().std(axis=0)

    def quantile(self, q):
        """Marginal quantiles of the kept samples: (d,) for a scalar q, (len(q), d)."""
        qa = np.asarray(q, dtype=float)
        if not np.all((qa >= 0) & (qa <= 1)):
            raise ValueError("quantile levels must lie in [0, 1]")
        return np.quantile(self.kept(), qa, axis=0)

    def summary(self):
        """{param: {"mean", "sd"}} over the kept samples, plain floats."""
        m, s = self.mean(), self.sd()
        return {p: {"mean": float(m[j]), "sd": float(s[j])} for j, p in enumerate(self.params)}

    def mcse(self, n_batches=50) -> np.ndarray:
        """Batch-means Monte Carlo standard errors of the kept means, (d,)."""
        k = self.kept()
        return np.array([batch_means_se(k[:, j], n_batches) for j in range(k.shape[1])])

    def ess(self) -> np.ndarray:
        """Effective sample sizes of the kept samples, (d,)
        (:func:`effective_sample_size`)."""
        k = self.kept()
        return np.array([effective_sample_size(k[:, j]) for j in range(k.shape[1])])


# ---------------------------------------------------------------- initial steps


def pilot_steps(fam, mech, y, l, r, b, theta0, positive, rng, u=None):
    """Initial steps 1/sqrt(n I_jj) from a Gaussian approximation (module docstring);
    its latent draws ``u`` (rows, n), or drawn from ``rng``."""
    n = y.size
    rows = -(-PILOT_DRAWS // n)
    if u is None:
        u = fam.latent_sample(rng, (rows, n))
    noise = float(np.mean(mech.variance(b)))
    phi0 = np.where(positive, np.log(np.where(positive, theta0, 1.0)), theta0)
    x0 = np.asarray(fam.from_latent(u, *theta0), float)
    sd_x = float(np.std(x0)) if np.all(np.isfinite(x0)) else 0.0
    t0 = np.clip(x0, l, r)
    v = float(np.var(t0)) + noise
    sd_y = float(np.std(y)) if n > 1 else 1.0
    steps = np.empty(theta0.size)
    for j in range(theta0.size):
        h = PILOT_H if positive[j] else PILOT_H * max(sd_x, 1e-8 * max(abs(theta0[j]), 1.0))
        mom = []
        for sgn in (1.0, -1.0):
            phi = phi0.copy()
            phi[j] += sgn * h
            th = np.where(positive, np.exp(phi), phi)
            t = np.clip(np.asarray(fam.from_latent(u, *th), float), l, r)
            mom.append((t.mean(), t.var()))
        dm = (mom[0][0] - mom[1][0]) / (2 * h)
        dv = (mom[0][1] - mom[1][1]) / (2 * h)
        info = dm * dm / v + dv * dv / (2 * v * v)
        cap = MAX_LOG_STEP if positive[j] else max(sd_y, 1e-8)
        if math.isfinite(info) and info > 0:
            steps[j] = min(1.0 / math.sqrt(n * info), cap)
        else:
            steps[j] = cap / math.sqrt(n)
    return steps


# ---------------------------------------------------------------- the sampler


def mhaar(y, l, r, eps, family=None, mechanism="laplace", n_iter=100_000, n_aux=20, seed=0,
          burn_fraction=0.8, steps=None, adapt=True, generic=False, start=None,
          **backend_options):
    """MHAAR (Alparslan & Yildirim 2022, Algorithm 8) for p(theta | y_{1:n}), any family.

    The public entry point: for the normal family with the Laplace mechanism the paper's
    kernel :func:`dpbook.mhaar.paper_chain.mhaar_normal_laplace` (Section 6: steps
    (s_mu, s_var), the option ``parallel``); for any other model, or with
    ``generic=True``, the engine :func:`dpbook.mhaar.compiled_chain.mhaar_engine` (compiled for
    a location-scale family whose ``base_ppf`` compiles).  Both return an
    :class:`MHAARResult`, checked for a chain that never moved or has not found the
    posterior.

    Where the chain starts.  The paper's start is the releases' moment guess (the
    kernel's :func:`~dpbook.mhaar.paper_chain.chain_start`, the engine's
    ``family.guess``), and it stays the start whenever it is fine, so Section 6's chains
    keep their bits.  When the releases lie far outside their intervals, or the noise
    swamps them, that guess can be where the posterior has no mass (releases near 1e11
    through [40, 60]: mu_0 = 1e11; eps = 1e-4: sigma_0 = 8.8e4), and a random walk with
    steps of the posterior's size never leaves it.  So before the chain runs, the exact
    log posterior at the guess is compared with the reference points of
    :mod:`dpbook.diagnostics` (the guess moved into the intervals, the prior's median,
    the best point of a short climb from them): when the best of them is more than
    :data:`~dpbook.diagnostics.LOST_MARGIN` nats more probable, the chain starts there
    instead (``result.moved_start`` names it, with the gap; ``result.theta0`` is the
    start).  A departure from the paper (*Reproduction notes*).  A registered backend
    other than dpbook's own keeps its own start (``start`` is passed only when given).

    Parameters
    ----------
    y, l, r : released values and their clipping intervals (l, r broadcast against y).
    eps : privacy parameter; the noise scale is b_t = (r_t - l_t)/eps.
    family : a family name, a :class:`~dpbook.model.families.Family` or None (normal).
    mechanism : 'laplace', 'gaussian' or a :class:`~dpbook.model.mechanisms.Mechanism`.
    n_iter : number of MCMC iterations (Section 6: 10^5).
    n_aux : N, latent draws per observation (the current one plus N - 1 fresh; 20).
    seed : int, list of ints or numpy SeedSequence, keying counter-based streams; the
        same seed gives bit-identical output.
    burn_fraction : fraction of the chain discarded before averaging (0.8).
    steps : initial random-walk steps, one per parameter, in the walk's coordinates;
        default the backend's.
    adapt : adapt the steps (Robbins-Monro on log s towards acceptance 0.1 from 10% of
        the iterations on).
    start : theta to start the chain at, one value per parameter; default (None) the
        moment guess, or the best reference point when the guess is poor (above).
    """
    n_iter, n_aux = check_count("n_iter", n_iter, 1), check_count("n_aux", n_aux, 2)
    check_seed(seed)
    try:
        burn_fraction = float(burn_fraction)
    except (TypeError, ValueError):
        burn_fraction = math.nan
    if not 0.0 <= burn_fraction < 1.0:
        raise ValueError(f"burn_fraction must be in [0, 1), got {burn_fraction!r}")
    # the chain, its steps and acceptances; n x N auxiliary draws and their weights
    check_memory(f"MHAAR with {n_iter} iterations and {n_aux} auxiliary draws for "
                 f"{np.size(y)} individuals", 40 * n_iter + 64 * np.size(y) * n_aux)
    impl = engine("mhaar", family, mechanism) if generic else backend("mhaar", family,
                                                                      mechanism)
    data, fam = check_observations(y, l, r), as_family(family)
    moved = None
    if start is not None:
        start = _checked_start(start, fam)
    else:
        moved = _better_start(impl, data, check_eps(eps), fam, mechanism, n_iter,
                              burn_fraction, steps, backend_options)
        start = None if moved is None else moved["theta"]
    if start is not None:
        backend_options["start"] = start
    res = impl(y, l, r, eps, n_iter=n_iter, n_aux=n_aux, seed=seed,
               burn_fraction=burn_fraction, steps=steps, adapt=adapt, **backend_options)
    res.moved_start = moved
    return _checked_chain(res, data, eps, fam, mechanism)


def _checked_start(start, fam):
    """``start`` as a tuple of floats, one per parameter; ValueError naming the problem."""
    try:
        values = tuple(np.asarray(start, dtype=object).reshape(-1))
    except (TypeError, ValueError):
        values = ()
    if len(values) != fam.dim:
        raise ValueError(f"start must be {fam.dim} number(s) ({', '.join(fam.params)}), "
                         f"got {start!r}")
    return fam.check_theta(*values)


def _default_walk(impl, data, eps, fam, mechanism, steps, options):
    """(start, to_walk, step bounds) of ``impl``'s chain: its default start, the map from
    theta to the random walk's coordinates and upper bounds on its initial steps in
    them (the sampler's own ``default_walk``); None for a backend not dpbook's."""
    fn = getattr(impl, "func", impl)
    walk = getattr(fn, "default_walk", None)
    if walk is None:
        return None
    try:  # the user's steps bound the walk's; bad ones are the backend's to refuse
        steps = np.asarray(steps, dtype=float).reshape(-1) if steps is not None else None
        if steps is not None and (steps.size != fam.dim or not np.all(steps > 0)):
            steps = None
    except (TypeError, ValueError):
        steps = None
    return walk(impl, data, eps, fam, mechanism, steps, options)


def _better_start(impl, data, eps, fam, mechanism, n_iter, burn_fraction, steps, options):
    """The :func:`dpbook.diagnostics.posterior_gap` of the default start when the chain
    cannot be trusted to leave it (start at the reference point instead), else None:
    a reference point is more than LOST_MARGIN nats more probable, and it lies further
    from the start, in the walk's coordinates, than ``TARGET_ACCEPT`` times the
    burn-in's iterations of the largest initial step (a walk accepting at the target
    rate, every accepted move straight towards it, would not get there before the
    samples are kept).  The second condition keeps the paper's start where the chain
    leaves it at once: Section 6's floor sigma_0^2 = 0.01 (releases whose variance is
    below the noise's) is often 90 nats below the mode, but a fraction of one step
    away."""
    from dpbook.diagnostics import lost_posterior

    walk = _default_walk(impl, data, eps, fam, mechanism, steps, options)
    if walk is None:
        return None
    guess, to_walk, bound = walk
    try:
        lost = lost_posterior(guess, *data, eps, fam, mechanism)
    except NotImplementedError:  # no release density for this family: keep the guess
        return None
    if lost is None:
        return None
    with np.errstate(all="ignore"):
        dist = np.abs(to_walk(np.asarray(lost["theta"], float)) - to_walk(guess)) / bound
    burn = max(1, int(math.floor(burn_fraction * n_iter)))
    if not np.any(np.isfinite(dist) & (dist > TARGET_ACCEPT * burn)):
        return None
    return {**lost, "steps_away": float(np.max(dist))}


def _checked_chain(res, data, eps, family, mechanism):
    """Warn when the kept part of a chain is beyond a threshold of its diagnostics
    (:func:`dpbook.diagnostics.check_reliability`: acceptance, effective sample size;
    ``res.reliability``), or when it has not found the posterior
    (:func:`dpbook.diagnostics.check_found`: a reference point far more probable than
    the kept samples' median; ``res.lost``)."""
    from dpbook.diagnostics import check_found, check_reliability

    check_reliability(res, "the MHAAR chain", stacklevel=3)
    res.lost = check_found("the MHAAR chain", np.median(res.kept(), axis=0), *data,
                           check_eps(eps), family, mechanism, stacklevel=4)
    return res
