"""The latent SMC (Algorithms 2-3) compiled for any location-scale family.

:class:`CompiledSMC` is what ``dpbook.smc.SMC(eps, family, mechanism)`` returns for a
location-scale family (Definition 2) with the Laplace or Gaussian mechanism and a
:class:`~dpbook.model.prior.LocationScalePrior`, when the family's ``base_logpdf`` and
``base_ppf`` compile (:func:`compiled_family`) and it moves theta by random-walk MH
(no conjugate ``gibbs``) or gives its conjugate move compiled (``engine_gibbs``); the
paper's model keeps its own kernel (:mod:`dpbook.smc.paper_kernel`).  It is the
algorithm of :class:`dpbook.smc.SMC`, whose numpy code stays the reference it is
tested against, in one compiled kernel per time step, one particle per loop iteration
(in parallel):

1. systematic resampling with the weights of time t-1;
2. Algorithm 3: for every k < t (or the subset moved at this step) an independent MH
   move of x_k with proposal x'_k = m + c z, z = G^-1(u) (the family's ``base_ppf`` of
   a keyed uniform) or, for a family with ``base_draw`` (the Student-t: its quantile is
   a slow Newton iteration), z drawn by it from a stream keyed by (particle, t, k),
   accepted if log u' < log g_b(y_k - T(x'_k)) - log g_b(y_k - T(x_k))
   (decided as the paper's kernel does: u' against a fast exponential, and again with
   ``vmath.log`` where the two are within a relative 1e-6, so every decision is the
   exact one); then ``n_theta_moves`` moves of theta: the family's compiled conjugate
   draw (``engine_gibbs``: the normal family's is the paper kernel's
   :func:`~dpbook.model.families.normal.gibbs_conjugate`), or random-walk MH moves of
   (m, log c) targeting
   eta(theta) prod_k p_theta(x_k) (with the log-Jacobian), with the covariance of
   :meth:`dpbook.smc.SMC._rw_chol` computed from the particles of time t-1 (its
   information matrix J compiled from the family's ``base_dlogpdf`` when that
   compiles);
3. propagation x_t = m + c z, z as the proposals draw it;
4. weighting by the mechanism's density of y_t - T(x_t) at scale (r_t - l_t)/eps.

Only the latent paths are stored; the likelihood of an x_k is computed again when it
is needed (an absolute value or a square: cheaper than reading it back).  Speed comes
from the loops over k: the uniforms of particle i at time t are the
SplitMix64 sequence of its own counter-keyed stream (:mod:`dpbook.rng`), word j a
function of j alone, so the loop over k has no carried state; the family's
functions use :mod:`dpbook.vmath` for exp and log; the sum over k of the move's
target is kept in eight explicit partial sums.  So LLVM vectorises every loop over k,
and the output is bit-identical for any number of threads and any vector width.  (A
family's ``base_draw``, a rejection sampler, keeps the sweep scalar; each x_k's draw
still has a stream of its own, seeded by word 2k, :func:`keyed_word`, so the same holds.)

The random streams are not those of the numpy reference (``SMC(..., generic=True)``),
so the two agree in distribution, not draw by draw.
"""

from __future__ import annotations

import functools
import importlib
import math

import numpy as np
from numba import njit, uint64

from dpbook import rng as _rng
from dpbook import vmath
from dpbook.model.compiler import (
    NotCompilable,
    compiled_family,
    warn_not_compiled,
)
from dpbook.model.families.base import Family, LocationScaleFamily, owner
from dpbook.model.mechanisms import KIND, get_mechanism, noise_loglik
from dpbook.model.prior import LocationScalePrior, log_prior_free
from dpbook.numba_cache import cached
from dpbook.parallel import run_chunks
from dpbook.rng import keyed_uniform, keyed_word
from dpbook.smc.resample_move import SMC, subset_draw
from dpbook.smc.resampling import systematic_keyed
from dpbook.validation import check_release
from dpbook.vmath import sum8

# purposes of the keyed streams: rng.stream_key(key, 8 t + purpose, particle)
P_INIT, P_RESAMPLE, P_MOVE, P_DRAW, P_THETA, P_SUBSET = (
    _rng.SMC_INIT, _rng.SMC_RESAMPLE, _rng.SMC_MOVE, _rng.SMC_DRAW, _rng.SMC_THETA,
    _rng.SMC_SUBSET)
# vectorised passes of a family's base_draw_pair over a sweep's proposals before the
# ones it still rejects are drawn by base_draw (a scalar call, some 100 ns)
PAIR_TRIES = 3


def takes(family, mechanism) -> bool:
    """Whether this model runs on the compiled engine (else the numpy SMC runs; a family
    whose primitive does not compile is named in a warning)."""
    if not isinstance(family, LocationScaleFamily) or \
            not isinstance(getattr(family, "prior", None), LocationScalePrior) or \
            type(get_mechanism(mechanism)) not in KIND or \
            not family.compiled_smc or \
            (_gibbs_owner(family) is not Family and _engine_gibbs(family) is None):
        return False  # a conjugate move without a compiled form is the numpy SMC's
    try:
        compiled_family(family)
    except NotCompilable as e:
        warn_not_compiled(family, f"the {family.name} family runs the numpy SMC, not the "
                          f"compiled engine: {e}.  To compile, write base_logpdf and "
                          f"base_ppf with numpy or math functions of one value (no scipy); "
                          f"see dpbook.smc.compiled_smc", stacklevel=6)
        return False
    return True


def _gibbs_owner(family):
    """The class whose ``gibbs`` the family has (Family: none, the random walk; so also
    for a subclass that sets ``gibbs = Family.gibbs``)."""
    return Family if type(family).gibbs is Family.gibbs else owner(family, "gibbs")


def _engine_gibbs(family):
    """The compiled form of the family's conjugate move, ``engine_gibbs`` ("module:
    attribute" of an njit function (state, s, row, t, m, c, pr) -> (s, m, c) drawing
    theta given the latent values row[:t] from the keyed stream state s), if the class
    that defines ``gibbs`` gives it (a subclass with a ``gibbs`` of its own must give
    its own); None if the family moves theta by random walk or has no compiled move."""
    owner = _gibbs_owner(family)
    target = vars(owner).get("engine_gibbs") if owner is not Family else None
    if target is None:
        return None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _engine_draw(family):
    """The family's ``engine_draw`` ("module:attribute" of a pair (fast, slow) of njit
    functions of one 64-bit word, :func:`make_proposals`) if the class that defines its
    ``base_ppf`` gives it (so a subclass with another base does not inherit it); else
    None (the quantile or ``base_draw``)."""
    target = vars(owner(family, "base_ppf")).get("engine_draw")
    if target is None:
        return None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


# ------------------------------------------------------------------ the kernels
_gamma = _rng.gamma_any  # Gamma(shape) for any shape > 0


@njit(cache=True)
def _init_theta(key, theta, pr):
    """theta ~ eta: m ~ N(pr[0], pr[1]), c^2 ~ IG(pr[2], pr[3])."""
    for i in range(theta.shape[0]):
        s = _rng.stream_key(key, P_INIT, i)
        s, z = _rng.normal(s)
        theta[i, 0] = pr[0] + math.sqrt(pr[1]) * z
        s, g = _gamma(s, pr[2])
        theta[i, 1] = math.sqrt(pr[3] / g)


@njit(inline="always", error_model="numpy")
def _sweep(propose, fs, m, c, base, zbuf, t, x_old, x_new, y, l, r, invb, kind, exact,
           exp_tol):
    """Algorithm 3's independent MH moves of x_0..x_{t-1} (one particle's row, proposal
    x' = m + c z, z = propose(fs, base, 2 k, zbuf): :func:`make_proposals`): accept if
    log u' < d, d the log likelihood ratio.  The test is
    u' < exp_approx(min(d, 0)) unless ``exact``; a decision with u' within a relative
    ``exp_tol`` (vmath.EXP_TOL) of the approximation is counted in ``close`` and the
    caller sweeps the row again with ``exact``, so every decision is that of vmath.log(u') < d.
    Returns (accepted, close)."""
    nacc = 0
    close = 0
    for k in range(t):
        xo = x_old[k]
        lo = noise_loglik(kind, y[k] - min(max(xo, l[k]), r[k]), invb[k])
        xp = m + c * propose(fs, base, 2 * k, zbuf)
        lp = noise_loglik(kind, y[k] - min(max(xp, l[k]), r[k]), invb[k])
        u = keyed_uniform(base, 2 * k + 1)
        if exact:
            ok = vmath.log(u) < lp - lo
        else:
            e = vmath.exp_approx(max(min(lp - lo, 0.0), -700.0))
            ok = u < e
            close += abs(u - e) <= exp_tol * e
        x_new[k] = xp if ok else xo
        nacc += ok
    return nacc, close


@njit(cache=True, error_model="numpy")
def _target(acc, t, m, c, pr):
    """The random walk's target from acc = sum_k log g((x_k - m)/c): the latent values'
    density (-t log c), the prior and the Jacobian."""
    return acc - t * math.log(c) + log_prior_free(m, c, pr)


def make_log_target(logpdf):
    """The random walk's target for a family's compiled base ``logpdf`` (see below)."""

    @njit(error_model="numpy")
    def log_target(fs, row, t, m, c, pr, tmp):
        """sum_k log g((x_k - m)/c) - t log c + the prior's term (``tmp``: t floats of
        scratch)."""
        inv = 1.0 / c
        for k in range(t):
            tmp[k] = logpdf(fs, (row[k] - m) * inv)
        return _target(sum8(tmp, t), t, m, c, pr)

    return log_target


@njit(inline="always", error_model="numpy")
def _no_prepare(fs, key, t, i, base, zbuf, zq, bad):
    """make_proposals' ``prepare`` where nothing is drawn before the sweep."""


def make_proposals(ppf, ppf1, draw, pair, word=None):
    """The family's draws of z ~ g in the step: ``prepare(fs, key, t, i, base, zbuf,
    zq, bad)``
    (before the sweep), ``propose(fs, base, j, zbuf)`` (x_k's proposal, j = 2 k, inlined
    in the sweep over k), ``propose1(fs, base, j)`` (the same, outlined: subset moves)
    and ``propagate(fs, s)`` -> (s, z) (x_t from the particle's theta stream).

    By the quantile, z = G^-1(u) with u word j of the particle's sequence (vectorised
    over k).  Where the family has ``draw`` (``base_draw``), z is drawn from a stream of
    its own seeded by word j (:func:`keyed_word`); where it also has ``pair``
    (``base_draw_pair``: z from two uniforms, or nan for a rejection), ``prepare``
    fills zbuf[k] with it from words 2k, 2k + 1 of the particle's P_DRAW sequence
    (vectorised over k), tries again where it rejected (``PAIR_TRIES`` passes in all,
    pass p from words 2(p t + k), 2(p t + k) + 1) and draws the ones still rejected by
    ``draw`` as above (the first accepted of independent tries: exactly g).  Keyed by
    (particle, time, k) all the same: the output does not depend on the order of
    evaluation.  With ``word`` (the family's ``engine_draw``: ``fast(w)`` -> z or nan,
    ``slow(w)`` -> z, an exact draw from one word w, :data:`ZIGGURAT`), ``prepare``
    fills zbuf[k] with fast(word 2k) (the words vectorised, ``fast`` in a scalar loop:
    its table look-ups would be vector gathers, slower) and slow(word 2k) where that is
    nan; the quantile still draws x_t."""
    if word is not None:
        fast, slow = word

        @njit(inline="always", error_model="numpy")
        def prepare(fs, key, t, i, base, zbuf, zq, bad):
            for k in range(t):  # the words, vectorised
                bad[k] = np.int64(keyed_word(base, 2 * k))
            nbad = 0
            for k in range(t):  # the fast path: table look-ups, scalar (no gathers)
                z = fast(uint64(bad[k]))
                zbuf[k] = z
                bad[nbad] = k  # (nbad <= k: word k is read already)
                nbad += not z == z
            for q in range(nbad):  # rare: the slow path
                k = bad[q]
                zbuf[k] = slow(keyed_word(base, 2 * k))

        @njit(inline="always", error_model="numpy")
        def propose(fs, base, j, zbuf):
            return zbuf[j >> 1]

        @njit(error_model="numpy")
        def propose1(fs, base, j):
            w = keyed_word(base, j)
            z = fast(w)
            return z if z == z else slow(w)

        @njit(error_model="numpy")
        def propagate(fs, s):
            s, u = _rng.uniform(s)
            return s, ppf1(fs, u)

        return prepare, propose, propose1, propagate

    if draw is None:
        prepare = _no_prepare
        @njit(inline="always", error_model="numpy")
        def propose(fs, base, j, zbuf):
            return ppf(fs, keyed_uniform(base, j))

        @njit(error_model="numpy")
        def propose1(fs, base, j):
            return ppf1(fs, keyed_uniform(base, j))

        @njit(error_model="numpy")
        def propagate(fs, s):
            s, u = _rng.uniform(s)
            return s, ppf1(fs, u)

        return prepare, propose, propose1, propagate

    @njit(error_model="numpy")
    def propose1(fs, base, j):
        return draw(fs, keyed_word(base, j))[1]

    @njit(error_model="numpy")
    def propagate(fs, s):
        return draw(fs, s)

    if pair is None:
        prepare = _no_prepare
        @njit(inline="always", error_model="numpy")
        def propose(fs, base, j, zbuf):
            return draw(fs, keyed_word(base, j))[1]
    else:
        @njit(inline="always", error_model="numpy")
        def prepare(fs, key, t, i, base, zbuf, zq, bad):
            b2 = _rng.stream_key(key, 8 * t + P_DRAW, i)
            for k in range(t):  # vectorised
                zbuf[k] = pair(fs, keyed_uniform(b2, 2 * k), keyed_uniform(b2, 2 * k + 1))
            nbad = 0
            for k in range(t):  # the rejected k, listed without a branch
                bad[nbad] = k
                nbad += not zbuf[k] == zbuf[k]
            for p in range(1, PAIR_TRIES):  # again for those (words 2(p t + k), +1)
                if nbad == 0:
                    break
                off = 2 * p * t
                for q in range(nbad):  # vectorised
                    k = bad[q]
                    zq[q] = pair(fs, keyed_uniform(b2, off + 2 * k),
                                 keyed_uniform(b2, off + 2 * k + 1))
                n = 0
                for q in range(nbad):
                    k = bad[q]
                    zbuf[k] = zq[q]
                    bad[n] = k
                    n += not zq[q] == zq[q]
                nbad = n
            for q in range(nbad):  # rare (Student-t: 1%): base_draw from MH word 2k
                k = bad[q]
                zbuf[k] = draw(fs, keyed_word(base, 2 * k))[1]

        @njit(inline="always", error_model="numpy")
        def propose(fs, base, j, zbuf):
            return zbuf[j >> 1]

    return prepare, propose, propose1, propagate


def make_rw_move(logpdf):
    """Algorithm 3 step 4 by ``n_moves`` random-walk MH moves of (m, log c) targeting
    eta(theta) prod_k p_theta(x_k), proposal covariance ``chol`` chol^T:
    ``move(fs, s, row, t, m, c, pr, chol, n_moves, tmp)`` -> (s, m, c, accepted)."""
    log_target = make_log_target(logpdf)

    @njit(error_model="numpy")
    def move(fs, s, row, t, m, c, pr, chol, n_moves, tmp):
        nth = 0
        cur = log_target(fs, row, t, m, c, pr, tmp)
        for _ in range(n_moves):
            s, z1 = _rng.normal(s)
            s, z2 = _rng.normal(s)
            s, u = _rng.uniform(s)
            mp = m + chol[0, 0] * z1
            cp = math.exp(math.log(c) + chol[1, 0] * z1 + chol[1, 1] * z2)
            if 0.0 < cp < math.inf and math.isfinite(mp):  # else target 0
                prop = log_target(fs, row, t, mp, cp, pr, tmp)
                if math.log(u) < prop - cur:
                    m = mp
                    c = cp
                    cur = prop
                    nth += 1
        return s, m, c, nth

    return move


def make_gibbs_move(gibbs):
    """Algorithm 3 step 4 by ``n_moves`` draws of the family's compiled conjugate move
    (``engine_gibbs``; an MH move accepted with probability one), with the signature of
    :func:`make_rw_move`'s ``move``."""

    @njit(error_model="numpy")
    def move(fs, s, row, t, m, c, pr, chol, n_moves, tmp):
        for _ in range(n_moves):
            s, m, c = gibbs(fs, s, row, t, m, c, pr)
        return s, m, c, n_moves

    return move


def make_step(prepare, propose, propose1, propagate, move_theta):
    """The compiled time step (module docstring, steps 2-4) for particles i0 <= i < i1,
    for a family's draws (:func:`make_proposals`) and theta move (:func:`make_rw_move`
    or :func:`make_gibbs_move`); one kernel per family class."""
    if prepare is _no_prepare:
        # propose computes z: the rare exact sweep calls its out-of-line twin propose1
        # (the same z) instead, which saves a third of the step's compile time
        @njit(inline="always", error_model="numpy")
        def again(fs, base, j, zbuf):
            return propose1(fs, base, j)
    else:  # z is read from zbuf
        again = propose

    @njit(nogil=True, error_model="numpy")
    def step(i0, i1, t, state, key, anc, x_old, x_new, th_old, th_new, y, l, r, invb, kind,
             ks, chol, pr, n_moves, logw, acc_x, acc_th, exp_tol):
        fs = state[0]
        n_moved = ks.shape[0]
        tmp = np.empty(max(t, 1))
        zbuf = np.empty(max(t, 1))  # scratch of prepare: the proposals' z, ...
        zq = np.empty(max(t, 1))
        bad = np.empty(max(t, 1), np.int64)  # ... and the k still to draw
        for i in range(i0, i1):
            a = anc[i]
            m = th_old[a, 0]
            c = th_old[a, 1]
            base = _rng.stream_key(key, 8 * t + P_MOVE, i)
            nacc = 0
            if n_moved == t:  # Algorithm 3 as written: every x_k, vectorised over k
                prepare(fs, key, t, i, base, zbuf, zq, bad)
                nacc, close = _sweep(propose, fs, m, c, base, zbuf, t, x_old[a], x_new[i],
                                     y, l, r, invb, kind, False, exp_tol)
                if close:  # rare: the row again, every test with vmath.log
                    nacc, close = _sweep(again, fs, m, c, base, zbuf, t, x_old[a],
                                         x_new[i], y, l, r, invb, kind, True, exp_tol)
            else:  # subset rejuvenation: the others are copied
                for k in range(t):
                    x_new[i, k] = x_old[a, k]
                for j in range(n_moved):
                    q = ks[j]
                    xp = m + c * propose1(fs, base, 2 * j)
                    xo = x_old[a, q]
                    lo = noise_loglik(kind, y[q] - min(max(xo, l[q]), r[q]), invb[q])
                    lp = noise_loglik(kind, y[q] - min(max(xp, l[q]), r[q]), invb[q])
                    if math.log(keyed_uniform(base, 2 * j + 1)) < lp - lo:
                        x_new[i, q] = xp
                        nacc += 1
            acc_x[i] = nacc
            s = _rng.stream_key(key, 8 * t + P_THETA, i)
            nth = 0
            if t > 0:  # Algorithm 3 step 4
                s, m, c, nth = move_theta(fs, s, x_new[i], t, m, c, pr, chol, n_moves,
                                          tmp)
            acc_th[i] = nth
            s, z = propagate(fs, s)  # Algorithm 2 steps 3-4
            xt = m + c * z
            x_new[i, t] = xt
            logw[i] = noise_loglik(kind, y[t] - min(max(xt, l[t]), r[t]), invb[t])
            th_new[i, 0] = m
            th_new[i, 1] = c

    return cached(step)


_proposals_for = functools.cache(make_proposals)


@functools.cache
def _move_for(logpdf, gibbs):
    return make_rw_move(logpdf) if gibbs is None else make_gibbs_move(gibbs)


_step_for = functools.cache(make_step)


def _run(step, n, t, *args):
    """``step`` over particles 0..n-1 at time t (:func:`run_chunks`: every particle has
    its own streams, so the chunks do not change a bit of the output)."""
    run_chunks(step, n, t, t, *args)


# ------------------------------------------------------------------ the SMC
class CompiledSMC(SMC):
    """:class:`dpbook.smc.SMC` compiled for a location-scale family (module docstring);
    created by ``SMC(eps, family, mechanism, ...)``, with the same parameters (``seed``:
    int, list of ints or SeedSequence, keying counter-based streams)."""

    takes = staticmethod(takes)
    general = True

    def __init__(self, eps, family=None, mechanism="laplace", n_particles=1000, n_max=1000,
                 seed=0, every=20, n_theta_moves=1, generic=False, subset=None):
        super().__init__(eps, family, mechanism, n_particles=n_particles, n_max=n_max,
                         seed=seed, every=every, n_theta_moves=n_theta_moves,
                         subset=subset)

    def _allocate(self):
        cf = self._cf = compiled_family(self.family)
        self._gibbs = _engine_gibbs(self.family)
        self._step = _step_for(*_proposals_for(cf.ppf, cf.ppf1, cf.draw, cf.pair,
                                               _engine_draw(self.family)),
                               _move_for(cf.logpdf, self._gibbs))
        self._key = np.uint64(_rng.seed_to_key(self._seed))
        p = self.family.prior
        self._pr = np.array([p.loc_mean, p.loc_var, p.scale2_shape, p.scale2_scale])
        N, n = self.N, self.n_max
        self._kind = KIND[type(self._mech)]
        self.theta = np.empty((N, 2))
        _init_theta(self._key, self.theta, self._pr)
        self._theta2 = np.empty((N, 2))
        self._x = [np.zeros((N, n)), np.zeros((N, n))]
        self._all = np.arange(n, dtype=np.int64)
        self._anc = np.arange(N, dtype=np.int64)
        self._logw = np.zeros(N)
        self._acc_x = np.zeros(N, np.int64)
        self._acc_th = np.zeros(N, np.int64)

    def _information(self, th, x):
        if self._cf.information is None:
            return super()._information(th, x)
        s00, s01, s11 = self._cf.information(self._cf.state, np.ascontiguousarray(th),
                                             np.ascontiguousarray(x))
        return np.array([[s00, s01], [s01, s11]])

    def update(self, y, l, r):
        """Algorithm 2 at time t: absorb one released value y with its interval [l, r]."""
        t = self.t
        y, l, r = check_release(y, l, r, t, self.n_max)
        self._y[t], self._l[t], self._r[t] = y, l, r
        self._b[t] = (r - l) / self.eps
        self._invb[t] = self.eps / (r - l)
        ks = self._all[:t]
        chol = np.zeros((2, 2))
        if t > 0:
            if self._gibbs is None:  # the random walk's covariance
                chol = self._rw_chol(self.theta, self.w, self._x[0][:, :t])
            systematic_keyed(self._key, P_RESAMPLE, t, self.w, self._anc)
            if self.subset is not None and self.subset < t:
                ks = np.sort(subset_draw(np.random.default_rng([int(self._key), t, P_SUBSET]),
                                         t, self.subset)).astype(np.int64)
        x_old, x_new = self._x
        _run(self._step, self.N, t, self._cf.state, self._key, self._anc, x_old, x_new,
             self.theta, self._theta2, self._y, self._l, self._r, self._invb, self._kind,
             ks, chol, self._pr, self.n_theta_moves, self._logw, self._acc_x,
             self._acc_th, vmath.EXP_TOL)
        self._x = [x_new, x_old]
        self.theta, self._theta2 = self._theta2, self.theta
        w = np.exp(self._logw - self._logw.max())
        self.w = w / w.sum()
        self.t = t + 1
        if t > 0:
            self._record(t, self._acc_x.sum() / (ks.size * self.N),
                         self._acc_th.sum() / (self.n_theta_moves * self.N))
        else:
            self._record(t, math.nan, math.nan)
