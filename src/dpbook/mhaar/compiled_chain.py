"""MHAAR (the Section 6 baseline) for any family and mechanism, compiled where it can be.

The sampler of Alparslan & Yildirim (2022), the printed box "Algorithm 8" (after
Andrieu, Yildirim, Doucet & Chopin 2020, Section 3), for p(theta | y_{1:n}) with the
releases Y_t = clip(X_t, l_t, r_t) + b_t V_t, b_t = (r_t - l_t)/eps.  The chain lives on
(theta, u_{1:n}), X_t = from_latent(u_t, theta); one iteration m:

1. phi' = phi + s * N(0, I) with phi = (m, log c) for a location-scale family
   (Definition 2; log of each positive parameter for another), the Jacobian in the
   target;
2. for every t: u_t^(1) = u_t and fresh u_t^(2..N);
3. accept theta' with probability
       min{1, eta(theta') J(theta') prod_t sum_i h(y_t|u_t^(i), theta')
              / [eta(theta) J(theta) prod_t sum_i h(y_t|u_t^(i), theta)]};
4. u_t <- u_t^(k_t), P(k_t = k) proportional to h(y_t | u_t^(k), theta_new) (theta' on
   acceptance, theta on rejection, as Algorithm 8 states).

Steps adapt as in the paper's kernel (:mod:`dpbook.mhaar.paper_chain`): from
iteration floor(0.1 n_iter) on, log s_j += m^(-0.6) (a_m - 0.1); the initial steps come
from the Gaussian-approximation pilot :func:`dpbook.mhaar.sampler.pilot_steps`, the
start is ``family.guess``.  A proposal of prior density 0 is rejected; u is still
resampled with theta's weights.

Random numbers are counter-keyed (:mod:`dpbook.rng`), no numpy Generator: iteration m's
proposal normals and accept uniform are stream (m, ``THETA``); observation t's fresh
draws are words 0 .. N-2 of the SplitMix64 sequence of stream (m, t) turned into
uniforms, and its resampling uniform is word N-1.  A location-scale family's latent is
z = G^-1(u) (its ``base_ppf``), x = m + c z; another family's is u, x = from_latent(u).
Stream (0, t) word 0 gives u_t at the start; stream (``PILOT``, t) the pilot's draws.

Two paths, one chain:

* compiled (:func:`make_chain`): a location-scale family whose ``base_ppf`` numba
  compiles (:func:`dpbook.model.compiler.compiled_family`, which rebinds the family's numpy
  code through :func:`dpbook.vmath.compile_scalar`), with its
  :class:`~dpbook.model.prior.LocationScalePrior`, the Laplace or Gaussian mechanism
  (weights that cannot underflow, below):
  whole blocks of iterations in one kernel; every loop over t (keyed uniforms and
  ``base_ppf``, the weights of both thetas, the resampling) is written so that LLVM
  vectorises it;
* any other model (a family that does not compile, with one warning naming the
  primitive; a discrete family; another mechanism or prior): one iteration at a time in
  Python, the draws through the family's numpy ``base_ppf`` / ``from_latent``, the
  weights through the mechanism's ``logpdf``, the sums and the resampling compiled.  The
  same streams in the same order: for a location-scale family both paths give the same
  chain up to the rounding of ``base_ppf`` and the prior.

The compiled chain shifts every log weight by its largest value over [l_t, r_t]
(-d_t/b_t for the Laplace mechanism, d_t the distance from y_t to [l_t, r_t]; the
Gaussian's -(d_t/b_t)^2/2), so its sums need no maximum when the shifted weights lie
above e^-600 (Laplace: eps <= 600); otherwise the Python path's max-shifted
log-sum-exp runs.  The paper's model
keeps its own kernel (:mod:`dpbook.mhaar.paper_chain`: ziggurat normals, a walk in
(mu, sigma^2), its Section 6 steps and start); ``mhaar(..., generic=True)`` runs the
normal family here instead.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np
from numba import njit

from dpbook import rng as _rng
from dpbook import vmath
from dpbook.mhaar.sampler import (
    ADAPT_EXPONENT,
    ADAPT_START_FRACTION,
    MAX_LOG_STEP,
    PILOT_DRAWS,
    TARGET_ACCEPT,
    MHAARResult,
    pilot_steps,
)
from dpbook.model.compiler import NotCompilable, compiled_family, warn_not_compiled
from dpbook.model.families import Family, LocationScaleFamily, as_family
from dpbook.model.mechanisms import KIND, get_mechanism, noise_loglik
from dpbook.model.prior import LocationScalePrior, log_prior_free
from dpbook.numba_cache import cached
from dpbook.rng import MHAAR_PILOT, MHAAR_THETA, keyed_uniform
from dpbook.validation import check_count, check_eps, check_observations, check_seed

THETA = MHAAR_THETA  # "observation" of the proposal / accept stream
PILOT = MHAAR_PILOT  # "iteration" of the pilot's draws
_CHUNK_DRAWS = 2e7  # latent draws per call of the compiled chain


# ------------------------------------------------------------------ compiled pieces
@njit(cache=True)
def _keyed_uniforms(key, m, rows, U, bases):
    """bases[t] = key of stream (m, t); U[i, t] = its word i as a uniform, i < rows."""
    n = bases.shape[0]
    for t in range(n):
        bases[t] = _rng.stream_key(key, m, t)
    for i in range(rows):
        for t in range(n):
            U[i, t] = keyed_uniform(bases[t], i)


@njit(cache=True, error_model="numpy")
def _log_sum(C, S, mx, tmp):
    """C holds log weights (N, n): C <- their shifted cumulative sums over i,
    S[t] = C[N-1, t]; returns sum_t log sum_i exp(C[i, t]) (max-shifted)."""
    N, n = C.shape
    for t in range(n):
        mx[t] = C[0, t]
    for i in range(1, N):
        for t in range(n):
            mx[t] = max(mx[t], C[i, t])
    for t in range(n):
        S[t] = 0.0
    for i in range(N):
        for t in range(n):
            S[t] += vmath.exp(C[i, t] - mx[t])
            C[i, t] = S[t]
    for t in range(n):
        tmp[t] = vmath.log(S[t]) + mx[t]
    acc = 0.0
    for t in range(n):
        acc += tmp[t]
    return acc


@njit(cache=True)
def _resample(bases, C, S, L, lat, k):
    """Step 4: lat[t] = L[k_t, t], k_t the inverse-cdf index of word N-1 of stream t
    under the cumulative weights C (totals S)."""
    N, n = C.shape
    for t in range(n):
        k[t] = 0
        S[t] = keyed_uniform(bases[t], N - 1) * S[t]
    for i in range(N - 1):
        for t in range(n):
            k[t] += C[i, t] <= S[t]
    for t in range(n):
        lat[t] = L[k[t], t]


@njit(cache=True)
def _proposal(key, m, d, g):
    """The d proposal normals of iteration m into g; returns the accept uniform."""
    s = _rng.stream_key(key, m, THETA)
    for j in range(d):
        s, g[j] = _rng.normal(s)
    s, w = _rng.uniform(s)
    return w


def make_chain(ppf):
    """The compiled chain for a family's compiled ``base_ppf`` (inlined)."""

    @njit(error_model="numpy")
    def chain(state, key, kind, y, l, r, invb, off, pr, m0, m1, adapt_start, st, z, Z, C0,
              C1, S0, S1, tmp, bases, k, g, out_th, out_acc, out_steps):
        """Iterations m0 + 1 .. m1; st = (m, c, log s_m, log s_logc) updated in place.
        Every log weight minus ``off`` (its largest value over c in [l_t, r_t]) is at
        least -600, so the sums need no maximum."""
        fs = state[0]  # the family's numeric attributes (self.df, say)
        N, n = Z.shape
        mu, c, ls0, ls1 = st[0], st[1], st[2], st[3]
        s0, s1 = math.exp(ls0), math.exp(ls1)
        for it in range(m0 + 1, m1 + 1):
            w = _proposal(key, it, 2, g)
            mp = mu + s0 * g[0]
            cp = math.exp(math.log(c) + s1 * g[1])
            valid = 0.0 < cp < math.inf and math.isfinite(mp)
            if not valid:
                mp, cp = mu, c
            for t in range(n):
                bases[t] = _rng.stream_key(key, it, t)
                Z[0, t] = z[t]
            for i in range(1, N):
                for t in range(n):
                    Z[i, t] = ppf(fs, keyed_uniform(bases[t], i - 1))
            for t in range(n):
                S0[t] = 0.0
                S1[t] = 0.0
            for i in range(N):  # shifted exponents in [-600, 0]: no maximum needed
                for t in range(n):
                    x = Z[i, t]
                    S0[t] += vmath.exp(noise_loglik(kind, y[t] - min(max(mu + c * x, l[t]), r[t]),
                                               invb[t]) - off[t])
                    S1[t] += vmath.exp(noise_loglik(kind, y[t] - min(max(mp + cp * x, l[t]), r[t]),
                                               invb[t]) - off[t])
                    C0[i, t] = S0[t]
                    C1[i, t] = S1[t]
            for t in range(n):
                tmp[t] = vmath.log(S1[t]) - vmath.log(S0[t])
            a1 = 0.0
            for t in range(n):
                a1 += tmp[t]
            acc = False
            if valid:
                acc = math.log(w) < (log_prior_free(mp, cp, pr) + a1
                                     - log_prior_free(mu, c, pr))
            if acc:
                mu, c = mp, cp
                _resample(bases, C1, S1, Z, z, k)
            else:
                _resample(bases, C0, S0, Z, z, k)
            out_th[it - 1, 0] = mu
            out_th[it - 1, 1] = c
            out_acc[it - 1] = acc
            if it > adapt_start:
                gam = it ** (-ADAPT_EXPONENT) * ((1.0 if acc else 0.0) - TARGET_ACCEPT)
                ls0 += gam
                ls1 += gam
                s0, s1 = math.exp(ls0), math.exp(ls1)
            out_steps[it - 1, 0] = s0
            out_steps[it - 1, 1] = s1
        st[0], st[1], st[2], st[3] = mu, c, ls0, ls1

    return cached(chain)


_chain_for = functools.cache(make_chain)


# ------------------------------------------------------------------ which path
def _compiled(fam, mech):
    """The compiled family if this model runs the compiled chain, else None (one
    warning per family class and reason when its primitive does not compile)."""
    if not isinstance(fam, LocationScaleFamily) or \
            not isinstance(getattr(fam, "prior", None), LocationScalePrior) or \
            type(mech) not in KIND:
        return None
    try:
        return compiled_family(fam)
    except NotCompilable as e:
        warn_not_compiled(fam, f"the {fam.name} family runs MHAAR one iteration at a time "
                          f"in Python, not compiled: {e}.  To compile, write base_logpdf "
                          f"and base_ppf with numpy or math functions of one value (no "
                          f"scipy); see dpbook.mhaar.compiled_chain", stacklevel=5)
        return None


def engine_mhaar(family, mechanism):
    """The engine's sampler for this model (:data:`dpbook.backends.ENGINES`): always
    :func:`mhaar_engine` (compiled or not, see the module docstring)."""
    return functools.partial(mhaar_engine, family=family, mechanism=mechanism)


# ------------------------------------------------------------------ the sampler
def mhaar_engine(y, l, r, eps, family=None, mechanism="laplace", n_iter=100_000, n_aux=20,
                 seed=0, burn_fraction=0.8, steps=None, adapt=True, start=None, **options):
    """MHAAR (Algorithm 8, module docstring) for any family and mechanism; called by
    :func:`dpbook.mhaar.mhaar` (same parameters; ``steps`` in the walk's coordinates,
    log for positive parameters; ``start``: theta to start at, default ``family.guess``).
    Returns an :class:`MHAARResult`."""
    _no_options(options)
    fam, mech = as_family(family), get_mechanism(mechanism)
    y, l, r = check_observations(y, l, r)
    eps = check_eps(eps)
    n_iter, n_aux = check_count("n_iter", n_iter, 1), check_count("n_aux", n_aux, 2)
    seed = check_seed(seed)
    d, n = fam.dim, y.size
    positive = np.array(fam.positive, dtype=bool)
    if steps is not None:
        try:
            s = np.asarray(steps, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            s = np.zeros(0)
        if s.shape != (d,) or not np.all(np.isfinite(s) & (s > 0)):
            raise ValueError(f"steps must be {d} positive finite numbers "
                             f"({', '.join(fam.params)}), got {steps!r}")
        steps = s
    t_start = time.perf_counter()
    key = np.uint64(_rng.seed_to_key(seed))
    cf = _compiled(fam, mech)
    ls = isinstance(fam, LocationScaleFamily)
    if not ls and type(fam).latent_sample is not Family.latent_sample:
        raise ValueError(f"the {fam.name} family's latent variables are not uniform "
                         f"(latent_sample overridden): MHAAR draws them as uniforms")

    def latent(U):  # uniforms -> the family's latent variables
        if cf is not None:
            return np.array([[cf.ppf1(cf.state[0], v) for v in row] for row in U])
        return np.asarray(fam.base_ppf(U), float) if ls else U

    b = (r - l) / eps
    if start is None:
        start = fam.guess(y, l, r, eps, mechanism)
    theta = np.array(fam.check_theta(*start), dtype=float)
    theta0 = theta.copy()
    U0 = np.empty((1, n))
    bases = np.empty(n, np.uint64)
    if steps is None:
        rows = -(-PILOT_DRAWS // n)
        U = np.empty((rows, n))
        _keyed_uniforms(key, PILOT, rows, U, bases)
        steps = pilot_steps(fam, mech, y, l, r, b, theta, positive, None, u=latent(U))
    _keyed_uniforms(key, 0, 1, U0, bases)
    Z = np.empty((n_aux, n))
    z = latent(U0)[0].copy()
    C0, C1 = np.empty((n_aux, n)), np.empty((n_aux, n))
    S0, S1, mx, tmp = (np.empty(n) for _ in range(4))
    k = np.empty(n, np.int64)
    g = np.empty(max(d, 2))
    out_th = np.empty((n_iter, d))
    out_acc = np.empty(n_iter, np.bool_)
    out_steps = np.empty((n_iter, d))
    adapt_start = int(math.floor(ADAPT_START_FRACTION * n_iter)) if adapt else n_iter + 1
    kind = KIND.get(type(mech))
    dist = np.maximum(np.maximum(l - y, y - r), 0.0) / b  # from y_t to [l_t, r_t], / b_t
    # log g_b over [l_t, r_t] (distance in [dist, dist + eps]): -d (Laplace) or -d^2/2
    off = -dist if kind == 0 else -0.5 * dist ** 2
    low = -(dist + eps) if kind == 0 else -0.5 * (dist + eps) ** 2
    if cf is not None and np.all(low - off >= -600.0):
        p = fam.prior
        pr = np.array([p.loc_mean, p.loc_var, p.scale2_shape, p.scale2_scale])
        chain = _chain_for(cf.ppf)
        st = np.array([theta[0], theta[1], math.log(steps[0]), math.log(steps[1])])
        chunk = max(10, int(_CHUNK_DRAWS // (n * n_aux)))
        for m0 in range(0, n_iter, chunk):
            chain(cf.state, key, kind, y, l, r, 1.0 / b, off, pr, m0, min(n_iter, m0 + chunk),
                  adapt_start, st, z, Z, C0, C1, S0, S1, tmp, bases, k, g, out_th, out_acc,
                  out_steps)
    else:  # (weights that could underflow: the max-shifted sums)
        _python_chain(fam, mech, latent, key, y, l, r, b, theta, np.log(steps), positive,
                      adapt_start, z, Z, (C0, C1), (S0, S1), mx, tmp, bases, k, g, out_th,
                      out_acc, out_steps)
    coords = tuple(f"log_{q}" if pos else q for q, pos in zip(fam.params, positive))
    return MHAARResult(params=tuple(fam.params), samples=out_th, accepted=out_acc,
                       steps=out_steps, theta0=theta0, burn_fraction=burn_fraction,
                       n_aux=n_aux, eps=eps, seed=seed, family=fam.describe(),
                       mechanism=mech.name, seconds=time.perf_counter() - t_start,
                       step_coords=coords)




def _no_options(options):
    if options:
        raise ValueError(f"the MHAAR engine has no option {sorted(options)[0]!r}")


def _default_walk(impl, data, eps, fam, mechanism, steps, options):
    """The start and walk of :func:`mhaar_engine` (for ``mhaar``'s choice of start,
    :func:`dpbook.mhaar.sampler._default_walk`): the moment guess, a walk in (loc,
    log scale) with the pilot's caps (1 in log coordinates, sd(y) in the others).
    An option the engine does not take is refused here, before the start is searched."""
    _no_options(options)
    pos = np.array(fam.positive, dtype=bool)
    sd_y = float(np.std(data[0])) if data[0].size > 1 else 1.0
    bound = np.array(steps if steps is not None else
                     np.where(pos, MAX_LOG_STEP, max(sd_y, 1e-8)), dtype=float)
    return (np.array(fam.check_theta(*fam.guess(*data, eps, mechanism)), dtype=float),
            lambda t: np.where(pos, np.log(np.where(pos, t, 1.0)), t), bound)


mhaar_engine.default_walk = _default_walk


def _python_chain(fam, mech, latent, key, y, l, r, b, theta, log_steps, positive,
                  adapt_start, z, Z, C, S, mx, tmp, bases, k, g, out_th, out_acc, out_steps):
    """The chain of :func:`make_chain` one iteration at a time, for any model: the
    latent map, the prior and the mechanism's density in numpy."""
    n_aux, n = Z.shape
    d = theta.size
    ls = isinstance(fam, LocationScaleFamily)
    U = np.empty((n_aux - 1, n))

    def log_target(th, ph):
        return float(np.asarray(fam.log_prior(*th), float)) + float(ph[positive].sum())

    def log_weights(th, out):
        x = th[0] + th[1] * Z if ls else np.asarray(fam.from_latent(Z, *th), float)
        out[...] = mech.logpdf(y - np.clip(x, l, r), b)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        phi = np.where(positive, np.log(theta), theta)
        lt = log_target(theta, phi)
        steps = np.exp(log_steps)
        for it in range(1, out_th.shape[0] + 1):
            w = _proposal(key, it, d, g)
            phi1 = phi + steps * g[:d]
            th1 = np.where(positive, np.exp(phi1), phi1)
            lt1 = log_target(th1, phi1) if np.isfinite(th1).all() else -math.inf
            valid = math.isfinite(lt1)
            _keyed_uniforms(key, it, n_aux - 1, U, bases)
            Z[0] = z
            Z[1:] = latent(U)
            log_weights(theta, C[0])
            log_weights(th1 if valid else theta, C[1])
            a0, a1 = _log_sum(C[0], S[0], mx, tmp), _log_sum(C[1], S[1], mx, tmp)
            acc = valid and math.log(w) < lt1 + a1 - lt - a0
            if acc:
                theta, phi, lt = th1, phi1, lt1
            j = 1 if acc else 0
            _resample(bases, C[j], S[j], Z, z, k)
            out_th[it - 1] = theta
            out_acc[it - 1] = acc
            if it > adapt_start:
                log_steps = log_steps + it ** (-ADAPT_EXPONENT) * (float(acc) - TARGET_ACCEPT)
                steps = np.exp(log_steps)
            out_steps[it - 1] = steps
