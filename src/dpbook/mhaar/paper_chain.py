"""MHAAR batch baseline of Section 6: MCMC for p(theta | y_{1:n}) with fixed intervals.

Section 6 of the paper compares its SMC with adaptive truncation to an MCMC method
that sees the whole batch y_{1:n} at once: the MHAAR sampler ("Metropolis-Hastings with
averaged acceptance ratios", Andrieu, Yildirim, Doucet & Chopin 2020, Section 3) in the
form given for sequentially released data by Alparslan & Yildirim (2022), the printed
box "Algorithm 8" (its text calls it Algorithm 9).

Model (Section 6): X_t = mu + sigma z_t with z_t ~ N(0, 1) (so the latent variables
have a distribution free of theta), released Y_t = T_{l_t}^{r_t}(X_t) + (r_t - l_t) V_t,
V_t ~ Laplace(1/eps), i.e.

    h(y_t | z_t, theta) = Laplace(y_t - clip(mu + sigma z_t, l_t, r_t); b_t),
    b_t = (r_t - l_t) / eps,

priors mu ~ N(0, 10^4), sigma^2 ~ IG(shape 1, scale 1).  The chain lives on
(theta, z_{1:n}), theta = (mu, sigma^2).  One iteration (Algorithm 8):

1. propose mu' = mu + s_mu N(0,1), sigma'^2 = sigma^2 + s_v N(0,1) (symmetric random
   walks in (mu, sigma^2); a proposal sigma'^2 <= 0 has prior density 0 and is rejected
   outright, which still counts as an iteration and still resamples z as in step 4);
2. for every t: z_t^(1) = z_t and fresh z_t^(2), ..., z_t^(N) ~ N(0, 1);
3. accept theta' with probability
       min{1, eta(theta') prod_t sum_i h(y_t|z_t^(i), theta')
              / [eta(theta) prod_t sum_i h(y_t|z_t^(i), theta)]},
   eta the prior density in (mu, sigma^2);
4. on acceptance theta <- theta' and z_t <- z_t^(k_t) with P(k_t = k) proportional to
   h(y_t | z_t^(k), theta'); on rejection theta is kept and z_t <- z_t^(k_t) with
   P(k_t = k) proportional to h(y_t | z_t^(k), theta) (the current-theta weights).  This
   is what Algorithm 8 states; the authors' MATLAB code (MHAAR_DP_norm.m) instead kept z
   on rejection because its weights there were exp(log_sum_0 - log_sum_0) = 1, which
   always selects k_t = 1.

Step sizes and adaptation (Section 6 settings).  The steps start at s_mu = 10/sqrt(n),
s_v = 20/sqrt(n).  From iteration m0 = floor(0.1 n_iter) on, after iteration m
(1-based, m > m0) both are adapted on the log scale by the Robbins-Monro rule

    log s_mu += m^(-0.6) (a_m - 0.1),   log s_v += m^(-0.6) (a_m - 0.1),

a_m = 1 if iteration m accepted else 0, aiming at an acceptance rate of 0.1.  The same
increment goes to both, so their ratio s_v / s_mu stays at its initial value (2 by
default).  The adaptation never stops, so the chain is adaptive (not time-homogeneous)
during the whole run, including the kept samples; the step m^(-0.6) vanishes
(diminishing adaptation, Andrieu & Thoms 2008), which keeps the averages consistent.
The authors adapted additively (s += gamma (S - 0.1)) with a smoothed acceptance S,
alternating between the two steps, with gamma = m^(-0.6): dpbook adapts log s so that
the steps stay positive.

The chain starts at theta_0 = (mean(y), sqrt(max(0.01, var(y) - 2 bbar^2))) (Laplace
noise of scale b has variance 2 b^2; bbar is the mean noise scale; the MATLAB code
subtracted b^2) and z_0 ~ N(0, 1).  The estimate is the average of theta = (mu, sigma)
over the last 20% of the iterations.

Other priors: the walk in (mu, log sigma^2).  Under any prior other than Section 6's
(chapter 8's calibration study under mu ~ N(0, 1), with the fixed interval [-8, 8]) the
chain moves (mu, log sigma^2) by default (``walk='log_var'``; ``walk='var'`` keeps the
paper's walk): log sigma'^2 = log sigma^2 + s_v N(0, 1), the Jacobian sigma'^2 / sigma^2
in the acceptance ratio (the target in (mu, log sigma^2) is eta(mu, sigma^2) sigma^2
times the likelihood), and initial steps of the size of the posterior sds, from the
Fisher pilot of the engine combined with the prior's precision
(:func:`_log_walk_steps`); the adaptation is the same.  The reason
(``benchmarks/mhaar_vs_exact.py``): where the data say little about sigma its
posterior keeps the IG(1, 1) prior's tail (density ~ sigma^-3, infinite variance), on
which a random walk of fixed size in sigma^2 is not geometrically ergodic: the steps
that the adaptation settles on (s_v about 6 in sigma^2, with s_mu = s_v / 2 about 4
posterior sds of mu) are too large where most of the mass is (sigma^2 about 1) and too
small for the tail (sigma^2 in the tens and hundreds), which the chain visits rarely and
leaves slowly.  A walk in log sigma^2 moves in proportion to sigma^2.
In chapter 8's study (eps = 1, n = 200, 100 replications, 10^4 iterations, the last
2000 kept) the paper's walk had effective sample sizes of sigma of median 39 (10% of the
replications below 14), its 95% quantile of sigma sat at the exact posterior's 0.917 on
average, and its 90% intervals of sigma covered 0.79 of the truths against the exact
posterior's 0.88 on the same releases; 10^5 iterations brought the coverage to 0.87,
but with effective sample sizes still below 35 in 10% of the replications (of 20 000
kept samples).  The log walk: median 129 (10%: 96) at 10^4 iterations, coverage 0.84;
1209 (10%: 1009) at 10^5, coverage 0.88, the exact posterior's replication by
replication.  The target is the same (the chain at 10^5 iterations matches the exact
quantiles); only the mixing differs.  Section 6's prior keeps the paper's walk: there
the interval is centred at the truth and narrow, the posterior concentrated, and the
Section 6 chains stay bit for bit what they were.

Implementation.  Steps 2-4 for the n observations run over blocks of ``_BLOCK`` = 64
observations, in parallel (numba ``prange``) or one after the other.  Every (iteration m,
observation t) pair has its own counter-keyed stream stream_key(key, m, t) (see
:mod:`dpbook.rng`; the proposal and the accept uniform use t = ``_THETA_STREAM``, z_0
uses m = 0), and all floating-point sums run in a fixed order inside a block, with the
block sums added serially, so the output is bit-identical for any number of threads, in
either mode, and however the iterations are split into calls of the compiled chain.

* Normals: draw i of stream (m, t) is the fast path of the ziggurat of
  :func:`dpbook.rng.normal` applied to the i-th SplitMix64 output of the stream (computed
  for 8 observations at a time); the ~1% rejected draws continue on a stream of their
  own.  The table look-ups stay scalar (vector gathers are slower on this machine) and
  are written in LLVM IR (``zig_lookup``), which keeps the loop's values in registers.
* Weights: with d_t the distance from y_t to [l_t, r_t], every c in [l_t, r_t] has
  d_t <= |y_t - c| <= d_t + (r_t - l_t), so the shifted exponents (d_t - |y_t - c|)/b_t
  lie in [-eps, 0]: sum_i h is summed directly (no max-shift) and cannot underflow for
  eps <= ``_FAST_EPS_MAX`` (larger eps use a guarded log-sum-exp kernel).  exp(u) is
  computed as 2^(u log2 e) by an inlined polynomial (relative error < 2e-15) on explicit
  8-lane (AVX-512) vectors, for both thetas in one pass, with the loop over the N
  draws inside the loop over the vectors (the running sums stay in registers).
* log prod_t sum_i h is the log of a running product kept in [1, 2) x 2^e (two logs per
  block); the acceptance needs only the two totals.
* The indices k_t are drawn by the inverse cdf of the cumulative weights (kept per
  block), one common uniform per t.  The serial mode draws them after the accept
  decision, for the chosen theta only, straight into z; the parallel mode draws both
  thetas' indices inside its one parallel region per iteration and copies the chosen
  z.  Both give the same k_t (same uniforms, same sums).
* n is padded to a multiple of 8 with a harmless dummy observation that is never used.

Cost: n N draws per iteration (2e9 for the Section 6 run: n = 1000, N = 20, 10^5
iterations), timed by benchmarks/bench_mhaar.py (the reproduction notes give the
figures; beside the engine for any family, which keeps this
kernel's random walk and adaptation but not its random numbers:
benchmarks/bench_mhaar_engine.py).  The explicit-vector LLVM code it calls is in
:mod:`dpbook.mhaar.simd`.
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np
from numba import njit, prange, uint64

from dpbook import rng as _rng
from dpbook.mhaar.sampler import (
    ADAPT_EXPONENT,
    ADAPT_START_FRACTION,
    TARGET_ACCEPT,
    MHAARResult,
    pilot_steps,
)
from dpbook.mhaar.simd import (
    FM,
    LANES,
    LN2,
    LOG2E,
    bits_to_f64,
    count_le_lanes,
    f64_to_bits,
    mix_lanes,
    weights_lanes,
    zig_lookup,
)
from dpbook.model.families.normal import Normal
from dpbook.model.mechanisms import get_mechanism
from dpbook.model.prior import SECTION6, LocationScalePrior
from dpbook.validation import (
    check_count,
    check_eps,
    check_observations,
    check_positive,
    check_seed,
)

_BLOCK = 64  # observations per parallel work item (fixed: results do not depend on threads)
_FAST_EPS_MAX = 600.0  # shifted exponents lie in [-eps, 0]; exp(-600) is far from underflow
_SLOW_STREAM = _rng.MHAAR_SLOW  # purpose tag of the ziggurat's rejection-step streams
_THETA_STREAM = _rng.MHAAR_THETA  # "observation index" of the proposal / accept stream
_MIN_PARALLEL_BLOCKS = 3  # fewer blocks run serially: a parallel launch costs more
_CHUNK_DRAWS = 2e7  # auxiliary draws per call of the compiled chain
WALKS = ("var", "log_var")  # the walk moves sigma^2 (the paper's) or log sigma^2
_PILOT_TAG = _rng.MHAAR_PILOT_PAPER  # seeds the step pilot of the log walk from the chain's key
_U64_FF = np.uint64(0xFF)
_U64_ONE = np.uint64(1)
_MASK52 = np.uint64(0x000FFFFFFFFFFFFF)
_SH8 = np.uint64(8)
_SH9 = np.uint64(9)
_SH11 = np.uint64(11)
_GAMMA = _rng.GAMMA
_KI = _rng.KI
_WI = _rng.WI
_TWO53_INV = _rng.TWO53_INV


# ---------------------------------------------------------------- the sampler


@njit(inline="always", cache=True)
def _log_prior(mu, v, pr):
    """log eta(mu, sigma^2) up to a constant: N(pr[0], pr[1]) x IG(pr[2], pr[3])."""
    return -0.5 * (mu - pr[0]) ** 2 / pr[1] - (pr[2] + 1.0) * math.log(v) - pr[3] / v




@njit(inline="always", cache=True)
def _normalise(p):
    """Split p > 0 (normal) into (f, e) with p = f 2^e, f in [1, 2): bit operations only."""
    bits = f64_to_bits(p)
    e = (bits >> 52) - 1023
    return bits_to_f64((bits & 0x000FFFFFFFFFFFFF) | (1023 << 52)), e


@njit(inline="always")
def _aux_normals(key, m, t0, n_aux, z, keys, words, pos, wb, zb):
    """Step 2 for lanes j < cn = len(z) (observations t0 + j): zb[0, j] = z[j] and
    zb[1:n_aux, j] fresh N(0, 1) draws of the stream (m, t0 + j).  wb: scratch like zb."""
    cn = z.shape[0]
    for j in range(cn):
        keys[j] = _rng.stream_key(key, m, t0 + j)
    # draw i = 0 is the current z_t; draws i = 1 .. n_aux-1 use counters 1 .. n_aux-1
    # of the stream (m, t), the resampling uniform counter n_aux
    for j in range(cn):
        zb[0, j] = z[j]
    for i in range(1, n_aux):
        mix_lanes(keys, words[i], uint64(i) * _GAMMA, cn)
    # fast path of the ziggurat of rng.normal: scalar table look-ups (vector gathers
    # are slower here), then the vectorised conversion
    nbad = zig_lookup(words, _WI, _KI, wb, pos, n_aux, cn)
    # x = rabs * w_idx with the sign bit of the word (vectorised)
    for i in range(1, n_aux):
        for j in range(cn):
            u = words[i, j]
            x = float(np.int64((u >> _SH9) & _MASK52)) * wb[i, j]
            zb[i, j] = bits_to_f64(f64_to_bits(x) | (np.int64((u >> _SH8) & _U64_ONE) << 63))
    for q in range(nbad):
        # ziggurat rejection steps (about 1% of the draws), on a stream of their own
        i = pos[q] // cn
        j = pos[q] - i * cn
        u = words[i, j]
        st = _rng.stream_key(keys[j], i, _SLOW_STREAM)
        _, zb[i, j] = _rng.normal_slow(st, u & _U64_FF, zb[i, j], (u >> _SH8) & _U64_ONE)


@njit(cache=True)
def aux_normals_array(key, m, n, n_aux):
    """zb[1:, :] of _aux_normals for observations 0 .. n-1 (n a multiple of LANES; for tests)."""
    z = np.zeros(n)
    keys = np.empty(n, dtype=np.uint64)
    words = np.empty((n_aux, n), dtype=np.uint64)
    pos = np.empty(n_aux * n, dtype=np.int64)
    zb = np.empty((n_aux, n))
    _aux_normals(key, m, 0, n_aux, z, keys, words, pos, np.empty((n_aux, n)), zb)
    return zb[1:]


@njit(cache=True, fastmath=FM, error_model="numpy")
def _block_sums(key, m, t0, n_real, n_aux, th, fast, y, l, r, ib, off, z, keys, words,
                pos, zb, c0, c1, sv):
    """Steps 2-3 of Algorithm 8 for observations t0 .. t0+cn-1; returns the two log sums.

    theta = (th[0], th[1]^2), theta' = (th[2], th[3]^2) (means and sds).
    y, l, r, ib, off, z are the slices [t0, t0 + cn) of the padded arrays, cn a multiple
    of LANES; only the first n_real lanes are observations (the others carry harmless
    values and are ignored).  Indexing slices from 0 also lets LLVM prove the indices
    non-negative, which its vectoriser needs.

    Leaves the stream keys in ``keys``, z_t^(1..N) in ``zb``, the cumulative weights of
    theta and theta' in rows 0 .. N-1 of ``c0`` and ``c1`` and their totals S_t in
    sv[0], sv[1] (for :func:`_resample`); returns
    (sum_t log sum_i h(y_t|z_t^(i), theta), the same for theta') up to terms common to
    both (the Laplace normalising constants and the shifts ``off``).
    ``ib`` is 1/b_t and ``off`` is d_t/b_t, both times log2(e) when ``fast``.
    Scratch: keys (B,) uint64; words (n_aux, B) uint64; pos (n_aux B,) int64;
    zb, c0, c1 (n_aux, B); sv (6, B), with B >= cn.
    """
    cn = y.shape[0]
    mu0, sg0, mu1, sg1 = th[0], th[1], th[2], th[3]
    _aux_normals(key, m, t0, n_aux, z, keys, words, pos, c0, zb)  # c0 is free until step 3
    s0 = sv[0]
    s1 = sv[1]
    if fast:
        # cumulative weights exp(off_t - |y_t - c|/b_t) = 2^(log2(e) (off_t - |y_t - c|/b_t));
        # the exponents lie in [-eps, 0].  Here ib = log2(e)/b, off = log2(e) d_t/b.
        weights_lanes(zb, y, l, r, off, ib, th, s0, s1, c0, c1, n_aux, cn)
    else:
        # guarded log-sum-exp: log weights, their maximum per t, shifted cumulative sums
        mx0 = sv[2]
        mx1 = sv[3]
        for j in range(cn):
            mx0[j] = -np.inf
            mx1[j] = -np.inf
        for i in range(n_aux):
            for j in range(cn):
                x = zb[i, j]
                a0 = min(max(mu0 + sg0 * x, l[j]), r[j])
                a1 = min(max(mu1 + sg1 * x, l[j]), r[j])
                c0[i, j] = -abs(y[j] - a0) * ib[j]
                c1[i, j] = -abs(y[j] - a1) * ib[j]
                mx0[j] = max(mx0[j], c0[i, j])
                mx1[j] = max(mx1[j], c1[i, j])
        for j in range(cn):
            s0[j] = 0.0
            s1[j] = 0.0
        for i in range(n_aux):
            for j in range(cn):
                s0[j] += math.exp(c0[i, j] - mx0[j])
                s1[j] += math.exp(c1[i, j] - mx1[j])
                c0[i, j] = s0[j]
                c1[i, j] = s1[j]
    # sum_t log S_t over the block
    if fast:
        # log of the running product, renormalised to [1, 2) x 2^e after every factor
        # (every S_t >= exp(-eps), so nothing underflows): two logs per block
        p0 = 1.0
        p1 = 1.0
        e0 = 0
        e1 = 0
        for j in range(n_real):
            p0, d0 = _normalise(p0 * s0[j])
            p1, d1 = _normalise(p1 * s1[j])
            e0 += d0
            e1 += d1
        return (e0 * LN2 + math.log(p0), e1 * LN2 + math.log(p1))
    l0 = 0.0
    l1 = 0.0
    for j in range(n_real):
        l0 += math.log(s0[j]) + sv[2, j]
        l1 += math.log(s1[j]) + sv[3, j]
    return (l0, l1)


@njit(cache=True, fastmath=FM, error_model="numpy")
def _resample(n_aux, keys, zb, c, s, g, k, out):
    """Step 4 for the lanes j < cn = len(out) of a block, after :func:`_block_sums`:
    out[j] = zb[k_j, j], k_j the inverse-cdf index of the uniform of stream (m, t0 + j)
    (its counter n_aux) under the cumulative weights c (totals s) of one theta.
    Scratch: g (B,) float, k (B,) int64."""
    cn = out.shape[0]
    inc = uint64(n_aux) * _GAMMA
    for j in range(cn):
        v = (float(np.int64(_rng.mix64(keys[j] + inc) >> _SH11)) + 0.5) * _TWO53_INV
        g[j] = v * s[j]
    count_le_lanes(c, g, k, n_aux - 1, cn)
    for j in range(cn):
        out[j] = zb[k[j], j]


@njit(inline="always")
def _one_block(b, key, m, n, n_aux, th, fast, y, l, r, ib, off, z, keys, words, pos, zb,
               c0, c1, sv, lsum):
    """Steps 2-3 for block b: the log sums go to lsum[b]."""
    t0 = b * _BLOCK
    t1 = min(t0 + _BLOCK, y.shape[0])
    a0, a1 = _block_sums(key, m, t0, min(t1, n) - t0, n_aux, th, fast, y[t0:t1], l[t0:t1],
                         r[t0:t1], ib[t0:t1], off[t0:t1], z[t0:t1], keys[b], words[b],
                         pos[b], zb[b], c0[b], c1[b], sv[b])
    lsum[b, 0] = a0
    lsum[b, 1] = a1


@njit(parallel=True, cache=True)
def _blocks_parallel(key, m, n, n_aux, th, fast, y, l, r, ib, off, z, zrej, zacc, keys,
                     words, pos, zb, c0, c1, sv, kv, lsum):
    """All blocks of one iteration, in parallel (one work item per block): the log sums
    and both candidate new z (resampled with theta's weights to zrej, with theta''s to
    zacc), so that one parallel region per iteration suffices."""
    for b in prange(lsum.shape[0]):
        _one_block(b, key, m, n, n_aux, th, fast, y, l, r, ib, off, z, keys, words, pos,
                   zb, c0, c1, sv, lsum)
        t0 = b * _BLOCK
        t1 = min(t0 + _BLOCK, y.shape[0])
        _resample(n_aux, keys[b], zb[b], c0[b], sv[b, 0], sv[b, 4], kv[b, 0], zrej[t0:t1])
        _resample(n_aux, keys[b], zb[b], c1[b], sv[b, 1], sv[b, 5], kv[b, 1], zacc[t0:t1])


@njit(cache=True)
def _blocks_serial(key, m, n, n_aux, th, fast, y, l, r, ib, off, z, keys, words, pos, zb,
                   c0, c1, sv, lsum):
    """Steps 2-3 for all blocks, one after the other (the same sums as in parallel)."""
    for b in range(lsum.shape[0]):
        _one_block(b, key, m, n, n_aux, th, fast, y, l, r, ib, off, z, keys, words, pos,
                   zb, c0, c1, sv, lsum)


@njit(cache=True)
def _resample_serial(n_aux, acc, z, keys, zb, c0, c1, sv, kv):
    """Step 4 for all blocks with the weights of the chosen theta (theta' if ``acc``,
    else theta), written straight into z (its old values are row 0 of zb)."""
    c, which = (c1, 1) if acc else (c0, 0)
    npad = z.shape[0]
    for b in range(keys.shape[0]):
        t0 = b * _BLOCK
        t1 = min(t0 + _BLOCK, npad)
        _resample(n_aux, keys[b], zb[b], c[b], sv[b, which], sv[b, 4], kv[b, 0], z[t0:t1])


@njit(cache=True)
def _init_z(key, npad):
    """z_0 ~ N(0, 1), one stream per observation (iteration 0)."""
    z = np.empty(npad)
    for t in range(npad):
        st = _rng.stream_key(key, 0, t)
        st, z[t] = _rng.normal(st)
    return z


def _workspace(npad, n_aux):
    nb = -(-npad // _BLOCK)
    return (np.empty(npad), np.empty(npad), np.empty(4),
            np.empty((nb, _BLOCK), dtype=np.uint64),
            np.empty((nb, n_aux, _BLOCK), dtype=np.uint64),
            np.empty((nb, n_aux * _BLOCK), dtype=np.int64),
            np.empty((nb, n_aux, _BLOCK)), np.empty((nb, n_aux, _BLOCK)),
            np.empty((nb, n_aux, _BLOCK)), np.empty((nb, 6, _BLOCK)),
            np.empty((nb, 2, _BLOCK), dtype=np.int64), np.empty((nb, 2)))


@njit(cache=True)
def _chain(key, n, y, l, r, ib, off, fast, parallel, n_aux, adapt_start, m0, m1, state, z,
           work, out_mu, out_sig, out_acc, out_smu, out_sv, pr, log_walk):
    """Iterations m0 + 1 .. m1 of Algorithm 8 (1-based), continuing from ``state``.

    pr = (loc_mean, loc_var, scale2_shape, scale2_scale), the prior's hyperparameters.
    ``log_walk``: the random walk moves log sigma^2 (sigma'^2 = sigma^2 exp(s_v g), with
    the Jacobian sigma'^2 / sigma^2 in the acceptance ratio) instead of sigma^2; s_v is
    then a step of log sigma^2.

    state = (mu, sigma^2, s_mu, s_v, log s_mu, log s_v) and z (the latent variables) are
    updated in place.  y, l, r, ib, off hold the n observations padded to a multiple of
    LANES.  Only the blocks of observations run in parallel (``parallel``); the accept
    decision, the adaptation and the bookkeeping are serial, and every random number is
    keyed by (iteration, observation), so the result depends neither on ``parallel`` nor
    on how the iterations are split into calls.
    """
    zrej, zacc, th, keys, words, pos, zb, c0, c1, sv, kv, lsum = work
    npad = y.shape[0]
    nb = lsum.shape[0]
    mu, v, s_mu, s_v, log_smu, log_sv = state[0], state[1], state[2], state[3], state[4], \
        state[5]
    for m in range(m0 + 1, m1 + 1):
        # theta-level stream: proposal and accept uniform
        st = _rng.stream_key(key, m, _THETA_STREAM)
        st, g1 = _rng.normal(st)
        st, g2 = _rng.normal(st)
        st, w = _rng.uniform(st)
        mu1 = mu + s_mu * g1
        if log_walk:
            v1 = v * math.exp(s_v * g2)
            valid = v1 > 0.0 and v1 < np.inf
        else:
            v1 = v + s_v * g2
            valid = v1 > 0.0
        if not valid:
            # rejected outright (prior density 0); z is still resampled with theta's
            # weights, which the blocks compute for both "thetas"
            mu1 = mu
            v1 = v
        th[0] = mu
        th[1] = math.sqrt(v)
        th[2] = mu1
        th[3] = math.sqrt(v1)
        if parallel:
            _blocks_parallel(key, m, n, n_aux, th, fast, y, l, r, ib, off, z, zrej, zacc,
                             keys, words, pos, zb, c0, c1, sv, kv, lsum)
        else:
            _blocks_serial(key, m, n, n_aux, th, fast, y, l, r, ib, off, z, keys, words,
                           pos, zb, c0, c1, sv, lsum)
        acc = False
        if valid:
            log_ratio = _log_prior(mu1, v1, pr) - _log_prior(mu, v, pr)
            if log_walk:
                log_ratio += s_v * g2  # log(v1 / v), the Jacobian of v = exp(log v)
            for b in range(nb):
                log_ratio += lsum[b, 1] - lsum[b, 0]
            acc = math.log(w) < log_ratio
        if acc:
            mu = mu1
            v = v1
        if not parallel:
            # only the chosen theta's indices k_t are drawn (same uniforms, same sums)
            _resample_serial(n_aux, acc, z, keys, zb, c0, c1, sv, kv)
        elif acc:
            for t in range(npad):
                z[t] = zacc[t]
        else:
            for t in range(npad):
                z[t] = zrej[t]
        out_mu[m - 1] = mu
        out_sig[m - 1] = math.sqrt(v)
        out_acc[m - 1] = acc
        if m > adapt_start:
            gam = m ** (-ADAPT_EXPONENT) * ((1.0 if acc else 0.0) - TARGET_ACCEPT)
            log_smu += gam
            log_sv += gam
            s_mu = math.exp(log_smu)
            s_v = math.exp(log_sv)
        out_smu[m - 1] = s_mu
        out_sv[m - 1] = s_v
    state[0] = mu
    state[1] = v
    state[2] = s_mu
    state[3] = s_v
    state[4] = log_smu
    state[5] = log_sv


def _run_chain(run, n_iter, npad, n_aux, parallel):
    """Call ``run(m0, m1, parallel)`` for consecutive chunks of iterations.

    parallel=None (auto) times short probes of both modes now and then and uses the
    faster: each iteration of the parallel mode ends with a barrier, which is cheap on an
    idle machine and very expensive when other processes keep the cores busy.  The probes
    recur after 8 chunks, and twice as late each time the choice stays the same.  The
    chain is the same whatever the mode, so the choice only affects the run time.
    Returns the number of iterations run in parallel mode.
    """
    chunk = max(10, int(_CHUNK_DRAWS // (npad * n_aux)))  # about 0.2 s of serial work
    probe = max(3, chunk // 100)
    m, n_par, mode = 0, 0, bool(parallel)
    next_probe, interval = 0, 8
    k = 0  # chunks run
    while m < n_iter:
        if parallel is None and k >= next_probe:
            times = {}
            for md in (True, False):
                m1 = min(n_iter, m + probe)
                t = time.perf_counter()
                run(m, m1, md)
                times[md] = (time.perf_counter() - t) / max(1, m1 - m)
                n_par += (m1 - m) if md else 0
                m = m1
            new_mode = times[True] < times[False]
            interval = interval * 2 if (k > 0 and new_mode == mode) else 8
            mode = new_mode
            next_probe = k + min(interval, 64)
            continue
        m1 = min(n_iter, m + chunk)
        run(m, m1, mode)
        n_par += (m1 - m) if mode else 0
        m = m1
        k += 1
    return n_par


# ---------------------------------------------------------------- public API


def _log_walk_steps(y, l, r, eps, mu0, v0, prior, seed):
    """Initial steps (s_mu, s_log_var) of the (mu, log sigma^2) walk: approximate
    posterior sds 1 / sqrt(n I_jj + P_j), with I the per-observation Fisher information of
    the engine's Gaussian-approximation pilot
    (:func:`dpbook.mhaar.sampler.pilot_steps`, at (mu0, sqrt(v0)), its latent draws
    from a numpy Generator seeded by the chain's key and a tag) and P the prior's
    precision: 1/loc_var for mu, and the curvature scale2_shape of
    the log density of log sigma^2 at its prior mode (sigma^2 ~ IG(a, b): log sigma^2 has
    log density -a w - b e^-w, curvature a at its mode).  The pilot's step of log sigma
    is doubled for log sigma^2.  With data that say little (the pilot's cap), the steps
    are close to the prior's sds."""
    n = y.size
    rng = np.random.default_rng([_rng.seed_to_key(seed), _PILOT_TAG])
    mech = get_mechanism("laplace")
    s = pilot_steps(Normal(), mech, y, l, r, (r - l) / eps,
                    np.array([mu0, math.sqrt(v0)]), np.array([False, True]), rng)
    info = np.array([1.0 / (n * s[0] ** 2), 1.0 / (n * (2.0 * s[1]) ** 2)])  # I_jj
    prec = np.array([1.0 / prior.loc_var, prior.scale2_shape])
    out = 1.0 / np.sqrt(n * info + prec)
    return float(out[0]), float(out[1])


def chain_start(y, l, r, eps):
    """The paper kernel's start (mu_0, sigma_0^2): the releases' mean, and their variance
    less the Laplace noise's 2 b^2 (at least 0.01)."""
    n = y.size
    var_y = float(np.var(y, ddof=1)) if n > 1 else 0.0
    return float(np.mean(y)), max(0.01, var_y - 2.0 * float(np.mean((r - l) / eps)) ** 2)


def mhaar_normal_laplace(y, l, r, eps, n_iter=100_000, n_aux=20, seed=0, burn_fraction=0.8,
                         steps=None, adapt=True, parallel=None, fast=None, prior=SECTION6,
                         walk=None, start=None):
    """MHAAR (Alparslan & Yildirim 2022, Algorithm 8) for p(mu, sigma | y_{1:n}), Section 6:
    the compiled backend of :func:`dpbook.mhaar.mhaar` for the normal/Laplace model.

    Parameters
    ----------
    y, l, r : released values and their clipping intervals (l, r broadcast against y;
        Section 6 uses the constant interval [mu - 10 sigma, mu + 10 sigma]).
    eps : privacy parameter; the noise scale is b_t = (r_t - l_t)/eps.
    n_iter : number of MCMC iterations (Section 6: 10^5).
    n_aux : N, the number of latent draws z_t^(1..N) per observation (the current one
        plus N - 1 fresh ones; Section 6: 20).
    seed : int or numpy SeedSequence; the same seed gives bit-identical output for any
        number of numba threads.
    burn_fraction : fraction of the chain discarded before averaging (0.8: the estimate
        is the mean of the last 20% of the samples).
    steps : initial random-walk steps (s_mu, s_var) of mu and sigma^2 (default
        10/sqrt(n) and 20/sqrt(n)); with ``walk='log_var'`` (s_mu, s_log_var), default
        from the pilot of :func:`_log_walk_steps`.
    adapt : adapt the steps (Robbins-Monro on log s towards acceptance 0.1 from 10% of
        the iterations on; see the module docstring).
    parallel : run the blocks of 64 observations of each iteration in parallel (numba
        threads): True, False, or None (default) to choose by timing short probes of
        both modes every few seconds (only with at least 3 blocks and 2 threads).  Every
        iteration ends with a barrier, so on a machine whose cores are busy with other
        work the serial mode is faster.  The output does not depend on this choice.
    fast : the polynomial 2^x kernel (default: for eps <= 600; False for tests).
    prior : the prior's hyperparameters, a :class:`~dpbook.model.prior.LocationScalePrior`
        (default Section 6's; :mod:`dpbook.backends` passes the family's).
    walk : the coordinates of the random walk: ``'var'``, the paper's (mu, sigma^2), or
        ``'log_var'``, (mu, log sigma^2) with the Jacobian in the acceptance ratio and
        initial steps of the size of the posterior sds (:func:`_log_walk_steps`).
        Default (None): ``'var'`` under the Section 6 prior (the paper's chain, bit for
        bit) and ``'log_var'`` under any other (see "Other priors" in the module
        docstring: under chapter 8's narrow prior the (mu, sigma^2) walk mixes too
        slowly in the heavy upper tail of sigma).
    start : (mu, sigma) to start the chain at; default (None) :func:`chain_start`, the
        paper's start from the releases' moments (:func:`dpbook.mhaar.mhaar` passes
        another start only when that one is poor).

    Returns
    -------
    MHAARResult (samples of (mu, sigma); steps of (mu, sigma^2), or of (mu, log sigma^2))
    """
    t_start = time.perf_counter()
    y, l, r = check_observations(y, l, r)
    eps = check_eps(eps)
    n_iter = check_count("n_iter", n_iter, 1)
    n_aux = check_count("n_aux", n_aux, 2)
    burn_fraction = float(burn_fraction)
    if not 0.0 <= burn_fraction < 1.0:
        raise ValueError(f"burn_fraction must be in [0, 1), got {burn_fraction!r}")
    n = y.size
    if not isinstance(prior, LocationScalePrior):
        raise ValueError(f"prior must be a LocationScalePrior, got {prior!r}")
    if walk is None:
        walk = "var" if prior.is_section6 else "log_var"
    if walk not in WALKS:
        raise ValueError(f"walk must be one of {', '.join(map(repr, WALKS))}, got {walk!r}")
    if start is None:
        mu0, v0 = chain_start(y, l, r, eps)
    else:
        mu0, sigma0 = Normal().check_theta(*start)
        mu0, v0 = float(mu0), float(sigma0) ** 2
    if steps is None and walk == "log_var":
        step_mu, step_var = _log_walk_steps(y, l, r, eps, mu0, v0, prior, seed)
    elif steps is None:
        step_mu, step_var = 10.0 / math.sqrt(n), 20.0 / math.sqrt(n)
    else:
        try:
            step_mu, step_var = steps
        except (TypeError, ValueError):
            raise ValueError(f"steps must be two positive numbers (s_mu, s_var), "
                             f"got {steps!r}") from None
    step_mu = check_positive("step_mu", step_mu)
    step_var = check_positive("step_var", step_var)
    pr = np.array([prior.loc_mean, prior.loc_var, prior.scale2_shape, prior.scale2_scale])
    fast = eps <= _FAST_EPS_MAX if fast is None else bool(fast)
    ib = eps / (r - l)  # 1/b_t
    off = np.maximum(np.maximum(l - y, y - r), 0.0) * ib  # distance from y_t to [l, r], / b_t
    if fast:
        # the fast kernel computes exp(u) as 2^(u log2(e))
        ib = ib * LOG2E
        off = off * LOG2E
    adapt_start = int(math.floor(ADAPT_START_FRACTION * n_iter)) if adapt else n_iter + 1
    key = np.uint64(_rng.seed_to_key(check_seed(seed)))
    # (n_iter, 2) in column-major order: the kernel writes each column as one array,
    # and MHAARResult's means over a column sum it as the 1-d arrays they are
    samples = np.empty((n_iter, 2), order="F")
    steps_out = np.empty((n_iter, 2), order="F")
    out_mu, out_sig = samples[:, 0], samples[:, 1]
    out_smu, out_sv = steps_out[:, 0], steps_out[:, 1]
    out_acc = np.empty(n_iter, dtype=np.bool_)
    nb = -(-n // _BLOCK)
    if parallel is None and (nb < _MIN_PARALLEL_BLOCKS or numba.get_num_threads() < 2):
        parallel = False
    # pad to a multiple of LANES with a harmless observation (y = 0 in [-1, 1])
    npad = -(-n // LANES) * LANES
    y, l, r, ib, off = (np.concatenate([a, np.full(npad - n, fill)])
                        for a, fill in ((y, 0.0), (l, -1.0), (r, 1.0), (ib, 1.0), (off, 0.0)))
    state = np.array([mu0, v0, step_mu, step_var, math.log(step_mu), math.log(step_var)])
    z = _init_z(key, npad)
    work = _workspace(npad, n_aux)

    def run(m0, m1, par):
        _chain(key, n, y, l, r, ib, off, fast, par, n_aux, adapt_start, m0, m1, state, z,
               work, out_mu, out_sig, out_acc, out_smu, out_sv, pr, walk == "log_var")

    n_parallel = _run_chain(run, n_iter, npad, n_aux, parallel)
    return MHAARResult(params=("mu", "sigma"), samples=samples, accepted=out_acc,
                       steps=steps_out, theta0=np.array([mu0, math.sqrt(v0)]),
                       burn_fraction=burn_fraction, n_aux=n_aux, eps=eps, seed=seed,
                       family=Normal().with_prior(prior).describe(), mechanism="laplace",
                       seconds=time.perf_counter() - t_start,
                       step_coords=("mu", "var" if walk == "var" else "log_var"),
                       n_parallel=n_parallel)


def _default_walk(impl, data, eps, fam, mechanism, steps, options):
    """The start and walk of :func:`mhaar_normal_laplace` (for ``mhaar``'s choice of
    start, :func:`dpbook.mhaar.sampler._default_walk`): the moment guess, and the
    paper's walk on (mu, sigma^2) or, under another prior, on (mu, log sigma^2)."""
    n = data[0].size
    mu0, v0 = chain_start(*data, eps)
    prior = getattr(impl, "keywords", {}).get("prior", SECTION6)
    walk = options.get("walk") or ("var" if prior.is_section6 else "log_var")
    if walk == "var":  # the paper's walk on (mu, sigma^2), its steps
        bound = np.array(steps if steps is not None else
                         (10.0 / math.sqrt(n), 20.0 / math.sqrt(n)), dtype=float)
        return np.array([mu0, math.sqrt(v0)]), lambda t: np.array([t[0], t[1] ** 2]), bound
    # (mu, log sigma^2): the pilot's steps are at most the prior's sds
    bound = np.array(steps if steps is not None else
                     (math.sqrt(prior.loc_var), 1.0 / math.sqrt(prior.scale2_shape)),
                     dtype=float)
    return (np.array([mu0, math.sqrt(v0)]),
            lambda t: np.array([t[0], 2.0 * math.log(t[1])]), bound)


mhaar_normal_laplace.default_walk = _default_walk
