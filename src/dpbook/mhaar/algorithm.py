"""MHAAR batch baseline of Section 6 for any population family and mechanism.

The same sampler as :mod:`dpbook.mhaar.normal_laplace` (Alparslan & Yildirim 2022, the printed box
"Algorithm 8", after Andrieu, Yildirim, Doucet & Chopin 2020, Section 3; the paper's
Section 6 batch baseline), written in vectorised numpy for every :class:`Family` and
:class:`Mechanism` instead of the compiled normal/Laplace kernel.

Model.  X_t = from_latent(u_t, theta) with u_t ~ latent_sample, a distribution free of
theta (location-scale families, Definition 2: u_t ~ g and X_t = m + c u_t; otherwise
u_t ~ U(0, 1) and the quantile function), released as
Y_t = clip(X_t, l_t, r_t) + b_t V_t, b_t = (r_t - l_t)/eps, so that

    h(y_t | u_t, theta) = f_V((y_t - clip(from_latent(u_t, theta), l_t, r_t)) / b_t) / b_t

with f_V the standard noise density of the mechanism, and prior eta = family.log_prior.
The chain lives on (theta, u_{1:n}).  One iteration (Algorithm 8):

1. propose theta' by a Gaussian random walk phi' = phi + s * N(0, I_d) in unconstrained
   coordinates phi (phi_j = log theta_j for the family's positive parameters, theta_j
   otherwise); the target in phi carries the Jacobian prod_{j positive} theta_j;
2. for every t: u_t^(1) = u_t and fresh u_t^(2), ..., u_t^(N) ~ latent_sample;
3. accept theta' with probability
       min{1, eta(theta') J(theta') prod_t sum_i h(y_t|u_t^(i), theta')
              / [eta(theta) J(theta) prod_t sum_i h(y_t|u_t^(i), theta)]}
   (sums over i by log-sum-exp: every observation's N log weights are shifted by
   their maximum before exponentiating, so nothing under- or overflows);
4. u_t <- u_t^(k_t) with P(k_t = k) proportional to h(y_t | u_t^(k), theta_new), where
   theta_new is theta' on acceptance and theta on rejection (as Algorithm 8 states;
   :mod:`dpbook.mhaar.normal_laplace` does the same).

A proposal whose prior density is 0 (or not finite) is rejected outright; u is still
resampled with the current theta's weights.

Step sizes and adaptation.  The same Robbins-Monro rule as :mod:`dpbook.mhaar.normal_laplace`: from
iteration m0 = floor(0.1 n_iter) on, after iteration m (1-based, m > m0),

    log s_j += m^(-0.6) (a_m - 0.1)   for every coordinate j,

a_m = 1 if iteration m accepted, targeting an acceptance rate of 0.1.  One increment for
every coordinate, so the ratios of the initial steps are kept for the whole run: they are
chosen so that each coordinate moves on the scale of its posterior spread.  Default
initial steps (``steps=None``): s_j = 1/sqrt(n I_jj), I the per-observation Fisher
information at theta_0 of a Gaussian approximation of the released value,
Y ~ N(E[T(X)], Var[T(X)] + Var[b V]) with T = clip to [l_t, r_t]:

    I_jj = (d E[T(X)] / d phi_j)^2 / v + (d Var[T(X)] / d phi_j)^2 / (2 v^2),
    v = Var[T(X)] + mean_t Var[b_t V],

the moments and their derivatives (central differences, h = 0.05 in log coordinates and
0.05 sd(X) in the others) estimated from about 2000 latent draws held fixed (common random
numbers).  For the normal family without clipping or noise this gives s_mu = sigma/sqrt(n)
and s_log_sigma = 1/sqrt(2n), the posterior sds.  Steps are capped at 1 in log coordinates
(a poor guess of a scale, e.g. a noise-corrected variance near 0, inflates v / c^2) and at
sd(y) in the others; a coordinate with no estimated information (e.g. all draws clipped)
gets the cap / sqrt(n).  In the tests (n = 40, eps = 5) the adapted steps end 2-5 times
the initial ones for the two-parameter families (11-13 times for the Poisson: in one
dimension an acceptance rate of 0.1 needs steps far above the posterior sd) and the
integrated autocorrelation times of the kept samples are 9-26 iterations.

Start and estimate: theta_0 = family.guess(y, l, r, eps, mechanism), u_0 ~ latent_sample;
the estimate is the mean of the last (1 - burn_fraction) of the samples.

Departures from :mod:`dpbook.mhaar.normal_laplace` (the compiled normal/Laplace sampler):

* the random walk moves (mu, log sigma) (any family: log of each positive parameter),
  with the Jacobian in the acceptance ratio, instead of (mu, sigma^2) where proposals
  sigma'^2 <= 0 are rejected (the compiled sampler's walk under Section 6's prior; under
  other priors it moves (mu, log sigma^2), see its "Other priors"); the target posterior
  is the same;
* initial steps from the Gaussian-approximation Fisher information above instead of
  10/sqrt(n) and 20/sqrt(n) for mu and sigma^2 (under other priors the compiled sampler
  starts from this pilot combined with the prior's precision);
* the start is family.guess (for location-scale families: median(y) and the noise-
  corrected spread) instead of (mean(y), sqrt(max(0.01, var(y) - 2 bbar^2)));
* random numbers come from one numpy Generator (``default_rng(seed)``) in a fixed order
  per iteration (proposal normals, the (N-1) x n fresh latent draws, the accept uniform,
  the n resampling uniforms), not counter-keyed streams; the step pilot draws its latent
  sample first, then u_0.  Output is bit-identical for a seed, but differs from the
  compiled backend's;
* the sums over the N draws use a max-shifted log-sum-exp in double precision
  (dpbook.mhaar.normal_laplace uses a polynomial 2^x and running products);
* steps 2-4 run serially in numpy (no threads).

Implementation.  Both thetas are evaluated in one pass over (2, N, n) arrays that are
allocated once and overwritten in place.  Location-scale families compute m + c u in
place; discrete families whose latent map is the default (u ~ U(0, 1), x = ppf(u))
evaluate the quantile function from a table of the family's cdf on the integers the
draws reach (the same values as ``family.ppf``, which through ``scipy.stats`` costs
~0.1 s per iteration at n = 1000); other families call ``family.from_latent``.  The
Laplace and Gaussian mechanisms' log densities are computed in place without their
normalising constants (common to all draws and both thetas of an observation, so they
cancel); other mechanisms call ``mechanism.logpdf``.

Cost: n N latent draws and 2 n N weight evaluations per iteration.  Measured
(``python -m dpbook.mhaar.generic``: n = 1000, N = 20, eps = 2, Section 6's fixed
intervals; one core of the 2-core development VM while other jobs kept it busy, load
~3), seconds per 1000 iterations: normal/Laplace 0.86-0.90, normal/Gaussian 0.84,
Student-t(5)/Laplace 1.43-1.47, Poisson/Laplace 1.09-1.12 (the compiled dpbook.mhaar,
one thread, same machine and data: 0.16).  A Section 6 run (10^5 iterations) thus takes
~1.5 min for the normal family (~2.5 min Student-t).  The latent draws dominate
(numpy's normal and Student-t samplers), then the exponentials and the cumulative sums
of the weights; at small n (40) the per-iteration overhead of ~30 numpy calls and the
prior evaluation dominate (~0.15-0.35 ms per iteration); benchmarks/bench_mhaar_generic.py
measures it.

Why this module is over 500 lines: a hundred of them are this statement of the algorithm;
the rest is one concept, the public sampler, with what only it uses (its result type,
shared with the compiled backend, the latent mapping of non-location-scale families and
the pilot step sizes).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from dpbook.backends import backend
from dpbook.model.families import Family, LocationScaleFamily, as_family
from dpbook.model.mechanisms import GaussianMechanism, LaplaceMechanism, get_mechanism
from dpbook.validation import (
    ReliabilityWarning,
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
MAX_TABLE = 100_000  # largest cdf table of the discrete quantile path
SMALL_SEARCH = 4096  # fewer draws: binary search instead of the guide table


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
    after it, in the coordinates named by ``step_coords`` (the generic sampler: log for
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

    def diagnostics(self, n_batches=50):
        d = {"acceptance": self.acceptance, "acceptance_kept": self.acceptance_kept,
             "steps": self.final_steps, "n_kept": self.n_kept}
        if self.n_kept >= 2 * n_batches:
            d["mcse"] = self.mcse(n_batches)
        return d


# ---------------------------------------------------------------- latent map and weights


class _DiscreteQuantile:
    """x = min{k integer : F(k) >= u} by a cdf table with a guide table.

    The table of theta holds F(k), k = lo - 1 .. hi; it serves draws in [umin, umax] when
    F(lo - 1) < umin and F(hi) >= umax.  The range (lo, hi), common to all thetas, is
    reset (from family.ppf at the draws' extremes, merged with the old range unless that
    would more than double it) only when that check fails; the tables of the last two
    thetas are kept (the current theta's is reused from one iteration to the next).
    Ranges wider than MAX_TABLE use family.from_latent.
    Look-up of more than SMALL_SEARCH draws by indexed search (Chen & Asau 1974):
    guide[j] = min{i : F_i >= j/G}, so the answer for u in [j/G, (j+1)/G) is guide[j] plus
    a few steps, taken only by the draws that need them (a binary search over 20 000
    random keys was 5 times slower); fewer draws use the binary search (less overhead).
    """

    G = 1024  # guide bins

    def __init__(self, family):
        self.family = family
        self.lo = None
        self.hi = None
        self.cache = {}
        self.grid = np.arange(self.G) / self.G

    def _widen(self, theta, umin, umax):
        q = np.asarray(self.family.ppf(np.array([umin, umax]), *theta), float)
        if not np.all(np.isfinite(q)) or q[1] - q[0] > MAX_TABLE:
            return False
        lo, hi = int(q[0]), int(q[1])
        if self.lo is not None:
            # merge with the old range (it serves the other theta of the iteration) unless
            # the chain has moved away from it
            ulo, uhi = min(lo, self.lo), max(hi, self.hi)
            if uhi - ulo <= 2 * (hi - lo) + 16:
                lo, hi = ulo, uhi
        if (lo, hi) != (self.lo, self.hi):
            self.lo, self.hi = lo, hi
            self.cache.clear()
        return True

    def _table(self, theta):
        entry = self.cache.get(theta)
        if entry is None:
            ks = np.arange(self.lo - 1, self.hi + 1, dtype=float)
            tab = np.asarray(self.family.cdf(ks, *theta), float)
            if len(self.cache) >= 2:
                self.cache.pop(next(iter(self.cache)))
            entry = self.cache[theta] = [tab, None]
        return entry

    def _guide(self, entry):
        if entry[1] is None:
            tab = entry[0]
            entry[1] = np.minimum(np.searchsorted(tab, self.grid, side="left"), tab.size - 1)
        return entry[1]

    def __call__(self, u, bins, theta, out, umin, umax):
        """out = quantiles of the flat draws u (bins = floor(G u)) at theta."""
        if self.lo is None and not self._widen(theta, umin, umax):
            out[...] = self.family.from_latent(u, *theta)
            return
        entry = self._table(theta)
        tab = entry[0]
        ok = tab[0] < umin and tab[-1] >= umax
        if not ok:
            if not self._widen(theta, umin, umax):
                out[...] = self.family.from_latent(u, *theta)
                return
            entry = self._table(theta)
            tab = entry[0]
            ok = tab[0] < umin and tab[-1] >= umax
        if u.size <= SMALL_SEARCH:
            idx = np.searchsorted(tab, u, side="left")  # same answer, less overhead
        else:
            idx = self._guide(entry)[bins]
            top = tab.size - 1
            sub = np.flatnonzero(tab[idx] < u)
            while sub.size:
                idx[sub] += 1
                sub = sub[(tab[idx[sub]] < u[sub]) & (idx[sub] < top)]
        if not ok:  # u = 0, or cdf and ppf disagree at the ends: stay inside the table
            np.maximum(idx, 1, out=idx)
        np.add(idx, self.lo - 1, out=out)


def latent_mapper(fam):
    """f(u, (theta_1, .., theta_d), out) writing from_latent(u, *theta) to out."""
    cls = type(fam)
    if isinstance(fam, LocationScaleFamily) and cls.from_latent is LocationScaleFamily.from_latent:
        def loc_scale(u, theta, out):
            np.multiply(u, theta[1], out=out)
            np.add(out, theta[0], out=out)
        return loc_scale
    if (fam.discrete and cls.from_latent is Family.from_latent
            and cls.latent_sample is Family.latent_sample):
        table = _DiscreteQuantile(fam)

        def discrete(u, theta, out):
            uf = u.reshape(-1)
            umin, umax = float(uf.min()), float(uf.max())
            bins = (uf * table.G).astype(np.intp) if uf.size > SMALL_SEARCH else None
            for k in range(out.shape[0]):
                table(uf, bins, tuple(float(t[k, 0, 0]) for t in theta), out[k].reshape(-1),
                      umin, umax)
        return discrete

    def generic(u, theta, out):
        out[...] = fam.from_latent(u, *theta)
    return generic


def _log_weights(mech, y, l, r, b, ib, x):
    """x (.., N, n) latent values -> log h(y | x) in place, up to a term per observation
    that is common to all draws and both thetas (it cancels in the ratio and the
    resampling): the built-in mechanisms drop their normalising constants."""
    np.maximum(x, l, out=x)
    np.minimum(x, r, out=x)
    np.subtract(y, x, out=x)
    if type(mech) is LaplaceMechanism:
        np.abs(x, out=x)
        np.multiply(x, -ib, out=x)  # -|v|/b
    elif type(mech) is GaussianMechanism:
        np.multiply(x, ib, out=x)
        np.square(x, out=x)
        np.multiply(x, -0.5, out=x)  # -(v/b)^2/2
    else:
        x[...] = mech.logpdf(x, b)


# ---------------------------------------------------------------- initial steps


def pilot_steps(fam, mech, y, l, r, b, theta0, positive, rng):
    """Initial steps 1/sqrt(n I_jj) from a Gaussian approximation (module docstring)."""
    n = y.size
    rows = -(-PILOT_DRAWS // n)
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
          burn_fraction=0.8, steps=None, adapt=True, generic=False, **backend_options):
    """MHAAR (Alparslan & Yildirim 2022, Algorithm 8) for p(theta | y_{1:n}), any family.

    The public entry point: for the normal family with the Laplace mechanism it runs the
    compiled backend :func:`dpbook.mhaar.normal_laplace.mhaar_normal_laplace` (chosen in
    :mod:`dpbook.backends`; ``generic=True`` runs this numpy code instead), which takes
    ``steps`` as (s_mu, s_var) and the ``backend_options`` ``parallel``.  Both return an
    :class:`MHAARResult`.

    The batch baseline of Section 6 of the paper for a general family and mechanism; see
    the module docstring for the algorithm and its departures from the compiled backend.

    Parameters
    ----------
    y, l, r : released values and their clipping intervals (l, r broadcast against y).
    eps : privacy parameter; the noise scale is b_t = (r_t - l_t)/eps.
    family : a family name, a :class:`~dpbook.model.families.Family` or None (normal).
    mechanism : 'laplace', 'gaussian' or a :class:`~dpbook.model.mechanisms.Mechanism`.
    n_iter : number of MCMC iterations (Section 6: 10^5).
    n_aux : N, latent draws per observation (the current one plus N - 1 fresh; 20).
    seed : int or numpy SeedSequence (``numpy.random.default_rng(seed)``); the same seed
        gives bit-identical output.
    burn_fraction : fraction of the chain discarded before averaging (0.8).
    steps : initial random-walk steps, one per parameter, in the unconstrained
        coordinates (log for positive parameters); default from the Fisher pilot.
    adapt : adapt the steps (Robbins-Monro on log s towards acceptance 0.1 from 10% of
        the iterations on).

    Returns
    -------
    MHAARResult
    """
    n_iter, n_aux = check_count("n_iter", n_iter, 1), check_count("n_aux", n_aux, 2)
    check_seed(seed)
    # the chain, its steps and acceptances; n x N auxiliary draws and their weights
    check_memory(f"MHAAR with {n_iter} iterations and {n_aux} auxiliary draws for "
                 f"{np.size(y)} individuals", 40 * n_iter + 64 * np.size(y) * n_aux)
    impl = None if generic else backend("mhaar", family, mechanism)
    if impl is not None:
        res = impl(y, l, r, eps, n_iter=n_iter, n_aux=n_aux, seed=seed,
                   burn_fraction=burn_fraction, steps=steps, adapt=adapt, **backend_options)
        return _checked_chain(res, check_observations(y, l, r), eps, as_family(family),
                              mechanism)
    if backend_options:
        raise ValueError(f"the generic MHAAR sampler has no option "
                         f"{sorted(backend_options)[0]!r}")
    fam = as_family(family)
    mech = get_mechanism(mechanism)
    y, l, r = check_observations(y, l, r)
    eps = check_eps(eps)
    n_iter = check_count("n_iter", n_iter, 1)
    n_aux = check_count("n_aux", n_aux, 2)
    try:
        burn_fraction = float(burn_fraction)
    except (TypeError, ValueError):
        burn_fraction = float("nan")
    if not 0.0 <= burn_fraction < 1.0:
        raise ValueError(f"burn_fraction must be in [0, 1), got {burn_fraction!r}")
    seed = check_seed(seed)
    n, d = y.size, fam.dim
    positive = np.array(fam.positive, dtype=bool)
    if steps is not None:
        s0 = np.atleast_1d(np.asarray(steps, dtype=float)) if _is_numeric(steps) else None
        if s0 is None or s0.shape != (d,) or not np.all(np.isfinite(s0) & (s0 > 0)):
            raise ValueError(f"steps must be {d} positive finite numbers "
                             f"({', '.join(fam.params)}), got {steps!r}")
        steps = s0
    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    b = (r - l) / eps
    ib = 1.0 / b
    theta = np.array(fam.check_theta(*fam.guess(y, l, r, eps, mechanism)), dtype=float)
    theta0 = theta.copy()
    if steps is None:
        steps = pilot_steps(fam, mech, y, l, r, b, theta, positive, rng)
    log_steps = np.log(steps)
    steps = np.exp(log_steps)

    pos_idx = [j for j in range(d) if positive[j]]

    def log_target(th, ph):
        """log eta(theta) + log Jacobian of phi -> theta (the sum of the log coordinates)."""
        lp = float(np.asarray(fam.log_prior(*th), float))
        return lp + sum(float(ph[j]) for j in pos_idx)

    xmap = latent_mapper(fam)
    adapt_start = int(math.floor(ADAPT_START_FRACTION * n_iter)) if adapt else n_iter + 1
    out_theta = np.empty((n_iter, d))
    out_acc = np.empty(n_iter, dtype=bool)
    out_steps = np.empty((n_iter, d))
    # workspaces: latent draws (N, n); values and weights for both thetas (2, N, n)
    u = np.empty((n_aux, n))
    u[0] = fam.latent_sample(rng, n)
    x = np.empty((2, n_aux, n))
    mx = np.empty((2, n))
    ssum = np.empty((2, n))
    cum = np.empty((n_aux, n))
    le = np.empty((n_aux - 1, n), dtype=bool)
    idx = np.empty(n, dtype=np.intp)
    cols = np.arange(n)
    th2 = np.empty((2, d))  # rows: theta, theta'
    args = tuple(th2[:, j, None, None] for j in range(d))  # (2, 1, 1) views
    amax, asum = np.maximum.reduce, np.add.reduce
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        phi = np.where(positive, np.log(theta), theta)
        lt = log_target(theta, phi)
        for m in range(1, n_iter + 1):
            phi1 = phi + steps * rng.standard_normal(d)
            theta1 = np.where(positive, np.exp(phi1), phi1)
            valid = bool(np.isfinite(theta1).all())
            lt1 = log_target(theta1, phi1) if valid else -math.inf
            valid = math.isfinite(lt1)
            th2[0] = theta
            th2[1] = theta1 if valid else theta  # invalid: theta's weights twice (rejected)
            u[1:] = fam.latent_sample(rng, (n_aux - 1, n))
            w = rng.random()
            xmap(u, args, x)
            _log_weights(mech, y, l, r, b, ib, x)
            # log-sum-exp over the N draws of every observation, both thetas at once
            amax(x, axis=1, out=mx)
            np.subtract(x, mx[:, None, :], out=x)
            np.exp(x, out=x)
            asum(x, axis=1, out=ssum)
            np.log(ssum, out=ssum)
            np.add(ssum, mx, out=ssum)
            tot = asum(ssum, axis=1)
            acc = valid and math.log(w) < lt1 - lt + float(tot[1] - tot[0])
            k = 1 if acc else 0
            if acc:
                theta, phi, lt = theta1, phi1, lt1
            # step 4: k_t by the inverse cdf of the chosen theta's weights
            np.add.accumulate(x[k], axis=0, out=cum)
            gt = rng.random(n)
            np.multiply(gt, cum[-1], out=gt)
            np.less_equal(cum[:-1], gt, out=le)
            asum(le, axis=0, dtype=np.intp, out=idx)
            u[0] = u[idx, cols]
            out_theta[m - 1] = theta
            out_acc[m - 1] = acc
            if m > adapt_start:
                log_steps = log_steps + m ** (-ADAPT_EXPONENT) * (float(acc) - TARGET_ACCEPT)
                steps = np.exp(log_steps)
            out_steps[m - 1] = steps
    coords = tuple(f"log_{p}" if pos else p for p, pos in zip(fam.params, positive))
    res = MHAARResult(params=tuple(fam.params), samples=out_theta, accepted=out_acc,
                      steps=out_steps, theta0=theta0, burn_fraction=burn_fraction,
                      n_aux=n_aux, eps=eps, seed=seed, family=fam.describe(),
                      mechanism=mech.name, seconds=time.perf_counter() - t_start,
                      step_coords=coords)
    return _checked_chain(res, (y, l, r), eps, fam, mechanism)


def _is_numeric(v):
    try:
        np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        return False
    return True


def _checked_chain(res, data, eps, family, mechanism):
    """Warn when the kept part of a chain never moved (its summary is one point), or
    when it has not found the posterior (:func:`dpbook.diagnostics.check_found`: a
    reference point far more probable than the kept samples' median; ``res.lost``)."""
    from dpbook.diagnostics import check_found

    kept = res.accepted[res.n_iter - res.n_kept:]
    if kept.size >= 100 and not kept.any():
        warnings.warn(f"the MHAAR chain accepted none of its last {kept.size} proposals: its "
                      f"posterior summary is not reliable here; use more iterations or the "
                      f"exact posterior", ReliabilityWarning, stacklevel=3)
    res.lost = check_found("the MHAAR chain", np.median(res.kept(), axis=0), *data,
                           check_eps(eps), family, mechanism, stacklevel=4)
    return res
