"""The compiled backend of the SMC (Algorithms 2 and 3) for the paper's model.

:class:`NormalLaplaceSMC` is what ``dpbook.smc.SMC(eps)`` returns for the normal family
with the Laplace mechanism (:meth:`NormalLaplaceSMC.takes`); the algorithm is
that of :mod:`dpbook.smc.resample_move`, fused into one kernel per time step.

Resample-move SMC (Gilks & Berzuini, 2001) for the normal model of Section 6:
X ~ N(mu, sigma^2), mu ~ N(0, 10^4), sigma^2 ~ IG(1, 1) (or the family's ``prior``,
passed to the kernels as ``pr`` = its four hyperparameters), released values
y_t = T_{l_t}^{r_t}(x_t) + (r_t - l_t) V_t, V_t ~ Laplace(1/eps).  Each particle
carries theta = (mu, sigma) and its own latent path x_{1:t}.

One call of :meth:`NormalLaplaceSMC.update` is Algorithm 2 at time t:

1. resampling (systematic) according to the weights of time t-1;
2. rejuvenation with Algorithm 3: an independent Metropolis-Hastings move on every
   x_k, k < t, proposing from P_theta so that the acceptance ratio is the Laplace
   likelihood ratio, followed by a Gibbs move on theta (mu | sigma, x then
   sigma^2 | mu, x; both conditionals are conjugate), which is an MH move with
   acceptance probability one;
3. propagation x_t ~ P_theta;
4. weighting w_t proportional to Laplace(y_t - T(x_t); (r_t - l_t)/eps).

The estimator sees only (y, l, r, eps): it never touches the population.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types, uint64
from numba.core import cgutils
from numba.extending import intrinsic

from dpbook import rng as _rng
from dpbook import vmath
from dpbook.model.families import as_family
from dpbook.model.families.base import inherits_model
from dpbook.model.families.normal import Normal, gibbs_conjugate
from dpbook.model.mechanisms import LaplaceMechanism, get_mechanism
from dpbook.model.prior import LocationScalePrior
from dpbook.smc.resample_move import SMC, History, check_smc_memory, check_subset, subset_draw
from dpbook.smc.resampling import systematic_keyed, thompson_index
from dpbook.validation import check_count, check_eps, check_release, check_seed
from dpbook.vmath import exp_approx

# Random streams, rng.stream_key(key, a, b): initial particles a = 1 (b = particle);
# with subset rejuvenation, the x_k moved at time t from numpy's Generator([key, t, 7]);
# resampling a = 3 (b = t); at time t, a = 8 t + purpose with b = particle for the MH
# words (xoshiro256++), b = particle << 32 | k for the ziggurat's rare slow path of
# x_k's proposal, and b = particle for the Gibbs move and the propagation.
P_INIT, P_RESAMPLE = _rng.SMC_INIT, _rng.SMC_RESAMPLE
P_MH, P_ZIG, P_GIBBS, P_SUBSET = _rng.SMC_MOVE, _rng.SMC_DRAW, _rng.SMC_THETA, _rng.SMC_SUBSET

# The MH sweep handles particles in blocks of _LANES (a performance knob only: every
# particle has its own streams, so the output does not depend on it or on threads).
_LANES = 128
_ULANES = uint64(_LANES)
_WIS = _rng.WIS
_KIF = _rng.KIF


@njit(cache=True)
def _init_particles(key, mu, sig, pr):
    """theta^(i) ~ eta: mu ~ N(pr[0], pr[1]), sigma^2 ~ IG(pr[2], pr[3]) (Section 6:
    N(0, 10^4) and IG(1, 1))."""
    for i in range(mu.shape[0]):
        s = _rng.stream_key(key, P_INIT, i)
        s, z = _rng.normal(s)
        mu[i] = pr[0] + math.sqrt(pr[1]) * z
        s, g = _rng.gamma(s, pr[2])
        sig[i] = math.sqrt(pr[3] / g)


# --- helpers of the MH sweep ---------------------------------------------------------

@intrinsic
def _gather_zig(typingctx, x_old, kl, aoff, jj, mag, xc, z, bad, wis, kif, i0, i1):
    """Step (b) of the MH sweep for particles i0 <= i < i1, scalar, written in IR:
    xc[i] = x_old[aoff[i] + kl] (the ancestor's x_k), z[i] = mag[i] * wis[jj[i]] (the
    ziggurat's fast path, _rng.ziggurat_fast), and the particles whose fast path
    rejects (mag[i] >= kif[jj[i]], about 1.2%) go to bad[i0], bad[i0 + 1], ... in
    order (their z[i] is to be replaced by the slow path); returns their number.

    In IR so that the loop keeps its pointers in registers and is not vectorised
    (vector gathers are several times slower than scalar loads on this machine); the
    rejection count is updated without a branch.
    """

    def codegen(context, builder, sig, args):
        b = builder
        i64 = ir.IntType(64)
        ptrs = [context.make_array(sig.args[k])(context, builder, value=args[k]).data
                for k in (0, 2, 3, 4, 5, 6, 7, 8, 9)]
        px, pa, pj, pm, pxc, pz, pbad, pw, pk = ptrs
        kl, i0, i1 = args[1], args[10], args[11]
        nbad = cgutils.alloca_once_value(builder, ir.Constant(i64, 0))
        pbad0 = b.gep(pbad, [i0], inbounds=True)
        with cgutils.for_range_slice(builder, i0, i1, ir.Constant(i64, 1)) as (i, _):
            off = b.add(b.load(b.gep(pa, [i], inbounds=True)), kl)
            b.store(b.load(b.gep(px, [off], inbounds=True)), b.gep(pxc, [i], inbounds=True))
            j = b.load(b.gep(pj, [i], inbounds=True))
            m = b.load(b.gep(pm, [i], inbounds=True))
            w = b.load(b.gep(pw, [j], inbounds=True))
            kf = b.load(b.gep(pk, [j], inbounds=True))
            b.store(b.fmul(m, w), b.gep(pz, [i], inbounds=True))
            nb = b.load(nbad)
            b.store(i, b.gep(pbad0, [nb], inbounds=True))
            rej = b.zext(b.fcmp_unordered(">=", m, kf), i64)  # not (m < kf)
            b.store(b.add(nb, rej), nbad)
        return b.load(nbad)

    return types.uint64(x_old, kl, aoff, jj, mag, xc, z, bad, wis, kif, i0, i1), codegen


@njit(cache=True)
def gibbs_propagate(key, a, i, t, m, sg, s1, s2, pr):
    """Algorithm 3 step 4 as a Gibbs move given s1 = sum x_k, s2 = sum x_k^2 (k < t;
    :func:`gibbs_conjugate`), then step 3 of Algorithm 2: x_t ~ N(mu, sigma^2).
    Returns (mu, sigma, x_t).  pr: the prior's (loc_mean, loc_var, scale2_shape,
    scale2_scale)."""
    s = _rng.stream_key(key, a, i)
    if t > 0:
        s, m, sg = gibbs_conjugate(s, t, m, sg, s1, s2, pr)
    s, z = _rng.normal(s)
    return m, sg, m + sg * z


class _Scratch(NamedTuple):
    """Per-particle work arrays of the MH sweep (separate arrays, see the kernel)."""

    s0: np.ndarray  # xoshiro256++ states
    s1: np.ndarray
    s2: np.ndarray
    s3: np.ndarray
    j: np.ndarray  # ziggurat table index of x_k's proposal
    aoff: np.ndarray  # offset of the particle's ancestor's path in x_old
    bad: np.ndarray  # particles whose ziggurat fast path rejected (per block)
    mag: np.ndarray  # its magnitude bits, as a float
    u: np.ndarray  # the MH uniform
    z: np.ndarray  # the N(0, 1) of the proposal
    xc: np.ndarray  # current x_k of the particle's ancestor
    sum1: np.ndarray  # sum_k x_k and sum_k x_k^2 after the moves
    sum2: np.ndarray
    m: np.ndarray  # theta of the particle's ancestor
    sg: np.ndarray

    @classmethod
    def new(cls, n):
        return cls(*(np.zeros(n, np.uint64) for _ in range(7)),
                   *(np.zeros(n) for _ in range(8)))


@njit(parallel=True, cache=True)
def move_propagate_weight(key, t, anc, x_old, x_new, mu, sig, mu_new, sig_new, y, l, r,
                           invb, logw, acc, pr, moved, exp_tol,
                           S0, S1, S2, S3, J, AOFF, BAD, MAG, U, Z, XC, SUM1, SUM2, M, SG):
    """Algorithm 2 steps 2-4 for every particle, given resampled ancestors ``anc``.

    Reads theta from (mu, sig) and the paths from x_old, writes (mu_new, sig_new),
    x_new and the log weights shifted by their maximum (logw - max logw).

    Step 2 is Algorithm 3 with the independent proposal q(x'|x) = p_theta(x'), so the
    MH ratio reduces to Laplace(y_k - T(x'_k)) / Laplace(y_k - T(x_k)); then the Gibbs
    update of (mu, sigma^2) given x_{1:t-1}.  Latent paths are stored block-major in
    flat arrays, x_k of particle i in block b = i // _LANES at
    (b n_max + k) _LANES + i % _LANES, so that the sweep runs across the particles of
    a block (SIMD lanes) for each k while walking memory sequentially:

      (a) two xoshiro256++ words per particle            vectorised
      (b) ancestor's x_k and ziggurat table look-ups     scalar, in IR (_gather_zig),
          then the ziggurat's rare slow path for the particles it lists
      (c) proposal, MH test, sums for the Gibbs move     vectorised

    The per-particle arrays are separate arguments and the parallel loop body makes
    no array views and calls no numba-inlined function returning a tuple: then numba
    marks the arrays `noalias`, which LLVM needs to vectorise (a) and (c).
    ``anc`` is uint64 (unsigned indices carry no negative-index wrap-around).
    An MH test with u within a relative ``exp_tol`` (:data:`dpbook.vmath.EXP_TOL`) of
    exp_approx(d) is taken again with math.exp.
    """
    n_part = mu.shape[0]
    n_blk = acc.shape[0]
    row_len = uint64(x_old.shape[0] // n_blk)  # n_max * _LANES
    a_t = 8 * t
    for b in prange(n_blk):
        i0 = uint64(b * _LANES)
        i1 = uint64(min(b * _LANES + _LANES, n_part))
        blk = uint64(b) * row_len  # start of block b in the flat path arrays
        for i in range(i0, i1):
            a = anc[i]
            M[i] = mu[a]
            SG[i] = sig[a]
            # where the ancestor's path starts in x_old (see the layout above)
            AOFF[i] = (a // _ULANES) * row_len + a % _ULANES
            S0[i], S1[i], S2[i], S3[i] = _rng.xoshiro_seed(key, a_t + P_MH, i)
            SUM1[i] = 0.0
            SUM2[i] = 0.0
        nacc = 0
        for k in range(t):
            kl = uint64(k) * _ULANES
            row = blk + kl - i0  # x_new[row + i] is x_k of particle i
            if moved[k] == 0:  # subset rejuvenation: x_k is copied from the ancestor
                for i in range(i0, i1):
                    xn = x_old[AOFF[i] + kl]
                    x_new[row + i] = xn
                    SUM1[i] += xn
                    SUM2[i] += xn * xn
                continue
            yk = y[k]
            lk = l[k]
            rk = r[k]
            ibk = invb[k]
            # (a) the words for x_k's proposal (ziggurat) and MH uniform
            for i in range(i0, i1):
                s0, s1, s2, s3, w1 = _rng.xoshiro_next(S0[i], S1[i], S2[i], S3[i])
                s0, s1, s2, s3, w2 = _rng.xoshiro_next(s0, s1, s2, s3)
                S0[i] = s0
                S1[i] = s1
                S2[i] = s2
                S3[i] = s3
                J[i], MAG[i] = _rng.ziggurat_split(w1)
                U[i] = _rng.u64_to_uniform(w2)
            # (b) resampling gather and the ziggurat: x'_k = mu + sigma z
            nbad = _gather_zig(x_old, kl, AOFF, J, MAG, XC, Z, BAD, _WIS, _KIF, i0, i1)
            for q in range(nbad):  # about 1.2% of the particles
                i = BAD[i0 + uint64(q)]
                st = _rng.stream_key(key, a_t + P_ZIG, (i << uint64(32)) | uint64(k))
                Z[i] = _rng.ziggurat_slow(st, J[i], MAG[i])
            # (c) accept x'_k w.p. min(1, exp(d)), d the log Laplace likelihood ratio
            close = 0
            for i in range(i0, i1):
                xc = XC[i]
                xp = M[i] + SG[i] * Z[i]
                cc = min(max(xc, lk), rk)
                cp = min(max(xp, lk), rk)
                d = (abs(yk - cc) - abs(yk - cp)) * ibk
                # (|d| <= eps, so the lower clamp only matters for eps > 700)
                e = exp_approx(max(min(d, 0.0), -700.0))
                u = U[i]
                ok = u < e
                close += abs(u - e) <= exp_tol * e
                xn = xp if ok else xc
                x_new[row + i] = xn
                SUM1[i] += xn
                SUM2[i] += xn * xn
                nacc += ok
            if close > 0:
                # rare (probability ~1e-6 per test): decide this row again exactly
                for i in range(i0, i1):
                    xc = XC[i]
                    xp = M[i] + SG[i] * Z[i]
                    cc = min(max(xc, lk), rk)
                    cp = min(max(xp, lk), rk)
                    d = (abs(yk - cc) - abs(yk - cp)) * ibk
                    ok = U[i] < math.exp(d)
                    xn = xp if ok else xc
                    old = x_new[row + i]
                    if xn != old:
                        x_new[row + i] = xn
                        SUM1[i] += xn - old
                        SUM2[i] += xn * xn - old * old
                        nacc += 1 if ok else -1
        acc[b] = nacc
        for i in range(i0, i1):
            m, sg, xt = gibbs_propagate(key, a_t + P_GIBBS, i, t, M[i], SG[i], SUM1[i],
                                         SUM2[i], pr)
            # propagation x_t ~ N(mu, sigma^2) and weighting
            x_new[blk + uint64(t) * _ULANES - i0 + i] = xt
            ct = min(max(xt, l[t]), r[t])
            logw[i] = -abs(y[t] - ct) * invb[t]
            mu_new[i] = m
            sig_new[i] = sg
    top = logw[0]
    for i in range(1, n_part):
        top = max(top, logw[i])
    for i in range(n_part):
        logw[i] -= top


class NormalLaplaceSMC(SMC):
    """The compiled backend of :class:`dpbook.smc.SMC` for the paper's model: the normal
    family with the Laplace mechanism.  Create it with ``SMC(eps)`` (or
    ``SMC(eps, family)`` for a normal family with another prior, ``Normal().with_prior``).

    The parameters are those of :class:`~dpbook.smc.SMC`; ``seed`` (int or numpy
    SeedSequence) keys counter-based streams, so the output is bit-identical for any
    number of threads; ``n_theta_moves`` must be 1 (one exact Gibbs move per step).
    """

    params = ("mu", "sigma")
    mechanism = "laplace"

    @staticmethod
    def takes(family, mechanism) -> bool:
        """The paper's model: the Laplace mechanism, a normal / inverse-gamma prior, and
        the normal family or a subclass that keeps its density, draws and Gibbs move."""
        return (type(get_mechanism(mechanism)) is LaplaceMechanism
                and inherits_model(family, Normal)
                and isinstance(family.prior, LocationScalePrior))

    def __init__(self, eps, family=None, mechanism="laplace", n_particles=1000, n_max=1000,
                 seed=0, every=20, n_theta_moves=1, generic=False, subset=None):
        if n_theta_moves != 1:
            raise ValueError("the compiled normal/Laplace SMC makes one exact Gibbs move per "
                             f"step: n_theta_moves must be 1, got {n_theta_moves!r} (or use "
                             "generic=True)")
        self.eps = check_eps(eps)
        self.N = check_count("number of particles", n_particles, 2)
        self.n_max = check_count("n_max", n_max, 1)
        self.every = check_count("every", every, 1)
        self.subset = check_subset(subset)
        check_smc_memory(self.N, self.n_max)
        self._key = np.uint64(_rng.seed_to_key(check_seed(seed)))
        self._moved = np.ones(self.n_max, np.uint8)  # which x_k the sweep moves
        self._family = as_family(family)
        p = self._family.prior
        self._pr = np.array([p.loc_mean, p.loc_var, p.scale2_shape, p.scale2_scale])
        N = self.N
        # latent paths, block-major and flat (see move_propagate_weight)
        size = -(-N // _LANES) * self.n_max * _LANES
        self._x = [np.zeros(size), np.zeros(size)]
        # theta = rows mu, sigma; the sweep reads the first array and writes the second
        self._theta = [np.zeros((2, N)), np.zeros((2, N))]
        _init_particles(self._key, self._theta[0][0], self._theta[0][1], self._pr)
        self.w = np.full(N, 1.0 / N)
        self._y = np.zeros(self.n_max)
        self._l = np.zeros(self.n_max)
        self._r = np.zeros(self.n_max)
        self._invb = np.zeros(self.n_max)
        self._anc = np.arange(N, dtype=np.int64)
        self._acc = np.zeros(-(-N // _LANES), dtype=np.int64)  # accepted moves per block
        self._work = _Scratch.new(N)
        self._logw = np.zeros(N)
        self.t = 0
        self.history = History(self.params)

    @property
    def family(self):
        """The normal family object (the model this compiled SMC implements)."""
        return self._family

    @property
    def theta(self):
        """The particles as an (N, 2) array of (mu, sigma) (a copy), as SMC.theta."""
        return np.column_stack([self.mu, self.sigma])

    @property
    def mu(self):
        """mu of the N particles (a view, valid until the next update)."""
        return self._theta[0][0]

    @property
    def sigma(self):
        """sigma of the N particles (a view, valid until the next update)."""
        return self._theta[0][1]

    @property
    def key(self):
        """The 64-bit key of this run's counter-keyed random streams (:mod:`dpbook.rng`)."""
        return self._key

    def paths(self):
        """The latent paths x_{1:t} of the N particles as an (N, t) array (a copy)."""
        if self.t == 0:
            return np.zeros((self.N, 0))
        x = self._x[0].reshape(-1, self.n_max, _LANES)[:, : self.t, :]
        return x.transpose(0, 2, 1).reshape(-1, self.t)[: self.N].copy()

    def update(self, y, l, r):
        """Algorithm 2 at time t: absorb one released value y with its interval [l, r]."""
        t = self.t
        y, l, r = check_release(y, l, r, t, self.n_max)
        self._y[t], self._l[t], self._r[t] = y, l, r
        self._invb[t] = self.eps / (r - l)
        N = self.N
        if t > 0:
            systematic_keyed(self._key, P_RESAMPLE, t, self.w, self._anc)
        else:
            self._anc[:] = np.arange(N)
        x_old, x_new = self._x
        th_old, th_new = self._theta
        moved = t
        if self.subset is not None and self.subset < t:
            chosen = subset_draw(np.random.default_rng([int(self._key), t, P_SUBSET]), t,
                                 self.subset)
            self._moved[:t] = 0
            self._moved[chosen] = 1
            moved = self.subset
        move_propagate_weight(self._key, t, self._anc.view(np.uint64), x_old, x_new,
                               th_old[0], th_old[1], th_new[0], th_new[1], self._y, self._l,
                               self._r, self._invb, self._logw, self._acc, self._pr,
                               self._moved, vmath.EXP_TOL, *self._work)
        self._moved[:t] = 1
        self._x = [x_new, x_old]
        self._theta = [th_new, th_old]
        w = np.exp(self._logw)  # the sweep shifted the log weights by their maximum
        self.w = w / w.sum()
        self.t = t + 1
        # the Gibbs move of theta is an MH move accepted with probability one
        self._record(t, float(self._acc.sum() / (moved * self.N)) if t > 0 else math.nan,
                     1.0 if t > 0 else math.nan)

    def _moments(self):
        w = self.w
        m = [float(w @ self.mu), float(w @ self.sigma)]
        sd = [math.sqrt(max(float(w @ (v - mv) ** 2), 0.0))
              for v, mv in ((self.mu, m[0]), (self.sigma, m[1]))]
        return m, sd

    def _columns(self):
        return [self.mu, self.sigma]

    def thompson_draw(self, rng: np.random.Generator):
        """Step 1 of Section 5.1: theta^(i) with probability w^(i)."""
        i = thompson_index(self.w, rng)
        return float(self.mu[i]), float(self.sigma[i])
