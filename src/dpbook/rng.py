"""Counter-keyed random numbers for the numba kernels (the compiled SMC of Algorithms 2-3,
the MHAAR baseline of Section 6).

The SMC and MHAAR kernels run their inner loops in parallel (numba ``prange``).
To make results bit-identical whatever the number of threads or the executor,
every (time step, particle) pair gets its own SplitMix64 stream whose key is a
hash of (seed, time, particle, purpose); the thread that happens to run it does
not matter.  Normal variates use the 256-layer ziggurat (Marsaglia & Tsang, 2000),
as numpy's ``Generator`` does; the tables are built below at import time.

The functions thread the 64-bit state explicitly: ``state, value = f(state)``.

The SMC's MH sweep draws two 64-bit words per latent value, about 10^9 per run, so
it uses a cheaper generator inside each (time step, particle) stream: xoshiro256++
(Blackman & Vigna, 2021; shifts, rotations and adds only, no multiplies, so it
vectorises across particles), seeded from that stream's SplitMix64 key.  Its words
feed the same ziggurat, split into a branch-free fast path (``ziggurat_fast``) and
the rare rejection steps (``ziggurat_slow``), which draw from a counter-keyed
SplitMix64 stream of their own so that the xoshiro stream always advances by
exactly two words per value.
"""

from __future__ import annotations

import math

import numpy as np
from numba import int64, njit, uint64

GAMMA = np.uint64(0x9E3779B97F4A7C15)

# Purposes of the keyed streams, stream_key(key, purpose, index): every algorithm's
# draws come from streams named here, so no two algorithms share one by accident.
# The latent SMC (the compiled engine and the paper's kernel): at time t, purpose
# 8 t + code, index the particle (the paper kernel's ziggurat: particle << 32 | k).
SMC_INIT, SMC_RESAMPLE, SMC_MOVE, SMC_DRAW, SMC_THETA, SMC_SUBSET = 1, 3, 4, 5, 6, 7
# MHAAR: the "observation index" of the proposal / accept stream; the paper kernel's
# ziggurat rejection steps; the seeds of the step pilot (paper kernel, engine)
MHAAR_THETA = 0xFFFFFFFFFFFF
MHAAR_SLOW = 0x5A1F
MHAAR_PILOT_PAPER = 0x91107
MHAAR_PILOT = 0x91107A
# Algorithm 4 / eq. (8): uniforms(key, purpose, n) of the release draws, their noise and
# the importance samples (part k of them: FISHER_SAMPLES + 8 k)
FISHER_RELEASE, FISHER_NOISE, FISHER_SAMPLES = 1, 2, 3
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
TWO53_INV = 1.0 / 9007199254740992.0


@njit(inline="always", cache=True)
def mix64(z):
    """SplitMix64 finaliser (Steele, Lea & Flood, 2014)."""
    z = (z ^ (z >> uint64(30))) * _M1
    z = (z ^ (z >> uint64(27))) * _M2
    return z ^ (z >> uint64(31))


@njit(inline="always", cache=True)
def stream_key(seed, a, b):
    """Key of the stream for (seed, a, b): independent of evaluation order."""
    return mix64(mix64(uint64(seed) + uint64(a) * GAMMA) ^ (uint64(b) * _M2 + GAMMA))


@njit(inline="always", cache=True)
def next_u64(state):
    state = state + GAMMA
    return state, mix64(state)


@njit(inline="always", cache=True)
def uniform(state):
    """Uniform on the open interval (0, 1), 53-bit resolution."""
    state, z = next_u64(state)
    return state, (float(int64(z >> uint64(11))) + 0.5) * TWO53_INV


def _ziggurat_tables(n=256, r=3.6541528853610088, v=4.92867323399e-3):
    """Layer edges x_0 > x_1 = r > ... > x_n = 0 of equal-area strips under exp(-x^2/2)."""
    f = lambda x: math.exp(-0.5 * x * x)  # noqa: E731
    x = np.empty(n + 1)
    x[0] = v / f(r)
    x[1] = r
    for i in range(1, n - 1):
        x[i + 1] = math.sqrt(-2.0 * math.log(v / x[i] + f(x[i])))
    x[n] = 0.0
    two52 = float(2**52)
    ki = np.array([int(x[i + 1] / x[i] * two52) for i in range(n)], dtype=np.uint64)
    wi = x[:n] / two52
    fi = np.array([f(xi) for xi in x])
    return ki, wi, fi


KI, WI, _FI = _ziggurat_tables()
ZR = 3.6541528853610088
_ZR_INV = 1.0 / ZR


@njit(cache=True)
def normal_slow(state, idx, x, neg):
    """Ziggurat rejection steps, reached with probability about 1%."""
    while True:
        if idx == 0:
            # tail beyond r (Marsaglia 1964)
            while True:
                state, u1 = uniform(state)
                state, u2 = uniform(state)
                xx = -_ZR_INV * math.log(u1)
                yy = -math.log(u2)
                if yy + yy > xx * xx:
                    return state, (-(ZR + xx) if neg else ZR + xx)
        state, u = uniform(state)
        if _FI[idx + 1] + u * (_FI[idx] - _FI[idx + 1]) < math.exp(-0.5 * x * x):
            return state, x
        state, z = next_u64(state)
        idx = z & uint64(0xFF)
        z = z >> uint64(8)
        neg = z & uint64(1)
        rabs = (z >> uint64(1)) & uint64(0x000FFFFFFFFFFFFF)
        x = float(int64(rabs)) * WI[idx] * (1.0 - 2.0 * float(int64(neg)))
        if rabs < KI[idx]:
            return state, x


@njit(inline="always", cache=True)
def normal(state):
    """Standard normal variate (256-layer ziggurat, fast path inlined)."""
    state, z = next_u64(state)
    idx = z & uint64(0xFF)
    z = z >> uint64(8)
    neg = z & uint64(1)
    rabs = (z >> uint64(1)) & uint64(0x000FFFFFFFFFFFFF)
    # branch-free sign: a mispredicted branch here costs more than the rest
    x = float(int64(rabs)) * WI[idx] * (1.0 - 2.0 * float(int64(neg)))
    if rabs < KI[idx]:
        return state, x
    return normal_slow(state, idx, x, neg)


# The 512-entry form of the ziggurat tables: index j = bits & 0x1FF holds the layer
# (j & 0xFF) and the sign (bit 8), so one look-up gives the signed layer width;
# the acceptance bound is stored as a float (exact: it is below 2^52).
WIS = np.concatenate([WI, -WI])
KIF = np.concatenate([KI, KI]).astype(np.float64)
_MASK52 = uint64(0x000FFFFFFFFFFFFF)


# The xoshiro/ziggurat-split functions below are plain @njit (not inline="always")
# on purpose: numba's parfor alias analysis treats the tuples that numba-level
# inlining builds as possible array aliases and then drops the `noalias` marks that
# let LLVM vectorise the SMC's loops.  LLVM inlines them anyway.


@njit(cache=True)
def _rotl(x, k):
    return (x << uint64(k)) | (x >> uint64(64 - k))


@njit(cache=True)
def xoshiro_seed(seed, a, b):
    """xoshiro256++ state for stream (seed, a, b): four SplitMix64 words (never all 0)."""
    s = stream_key(seed, a, b)
    s, w0 = next_u64(s)
    s, w1 = next_u64(s)
    s, w2 = next_u64(s)
    s, w3 = next_u64(s)
    return w0, w1, w2, w3


@njit(cache=True)
def xoshiro_next(s0, s1, s2, s3):
    """One xoshiro256++ step: ``s0, s1, s2, s3, word = xoshiro_next(s0, s1, s2, s3)``."""
    out = _rotl(s0 + s3, 23) + s0
    t = s1 << uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return s0, s1, s2, s3, out


@njit(cache=True)
def u64_to_uniform(z):
    """The top 53 bits of a word as a uniform on the open interval (0, 1)."""
    return (float(int64(z >> uint64(11))) + 0.5) * TWO53_INV


@njit(cache=True)
def ziggurat_split(z):
    """Ziggurat word -> (j, |x| numerator): the table index and the 52-bit magnitude.

    Same bits as :func:`normal`: layer z & 0xFF, sign bit 8, magnitude bits 9-60.
    """
    return z & uint64(0x1FF), float(int64((z >> uint64(9)) & _MASK52))


@njit(cache=True)
def ziggurat_fast(j, m):
    """The normal for table index j and magnitude m (from ziggurat_split), or NaN when
    the fast path rejects (about 1.2%): then call ziggurat_slow."""
    return m * WIS[j] if m < KIF[j] else np.nan


@njit(cache=True)
def ziggurat_slow(state, j, m):
    """Finish a normal whose fast path rejected, drawing from ``state``."""
    ju = uint64(j)
    state, x = normal_slow(uint64(state), ju & uint64(0xFF), m * WIS[ju], ju >> uint64(8))
    return x


@njit(cache=True)
def gamma(state, shape):
    """Gamma(shape, scale 1) variate, shape >= 1 (Marsaglia & Tsang, 2000)."""
    d = shape - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        state, z = normal(state)
        v = 1.0 + c * z
        if v <= 0.0:
            continue
        v = v * v * v
        state, u = uniform(state)
        if math.log(u) < 0.5 * z * z + d - d * v + d * math.log(v):
            return state, d * v


@njit(cache=True)
def gamma_any(state, shape):
    """Gamma(shape, scale 1) for any shape > 0 (boosted below 1: G(a) = G(a + 1) U^(1/a),
    Marsaglia & Tsang, 2000, section 6)."""
    if shape >= 1.0:
        return gamma(state, shape)
    state, g = gamma(state, shape + 1.0)
    state, u = uniform(state)
    return state, g * u ** (1.0 / shape)


@njit(cache=True)
def normals(seed, a, size):
    """``size`` standard normals from stream (seed, a, 0); for tests and helpers."""
    out = np.empty(size)
    state = stream_key(seed, a, 0)
    for i in range(size):
        state, out[i] = normal(state)
    return out


@njit(cache=True)
def uniforms(seed, a, size):
    out = np.empty(size)
    state = stream_key(seed, a, 0)
    for i in range(size):
        state, out[i] = uniform(state)
    return out


@njit(cache=True)
def gammas(seed, a, shape, size):
    out = np.empty(size)
    state = stream_key(seed, a, 0)
    for i in range(size):
        state, out[i] = gamma(state, shape)
    return out


@njit(cache=True)
def xoshiro_normals(seed, a, size):
    """``size`` normals from xoshiro stream (seed, a, 0) through the split ziggurat,
    exactly as the SMC's MH sweep draws them; for tests."""
    out = np.empty(size)
    s0, s1, s2, s3 = xoshiro_seed(seed, a, 0)
    for i in range(size):
        s0, s1, s2, s3, z = xoshiro_next(s0, s1, s2, s3)
        j, m = ziggurat_split(z)
        x = ziggurat_fast(j, m)
        if math.isnan(x):
            x = ziggurat_slow(stream_key(seed, a, i + 1), j, m)
        out[i] = x
    return out


@njit(cache=True)
def xoshiro_uniforms(seed, a, size):
    out = np.empty(size)
    s0, s1, s2, s3 = xoshiro_seed(seed, a, 0)
    for i in range(size):
        s0, s1, s2, s3, z = xoshiro_next(s0, s1, s2, s3)
        out[i] = u64_to_uniform(z)
    return out


def seed_to_key(seed) -> int:
    """A 64-bit kernel key from an int seed or a numpy SeedSequence."""
    if isinstance(seed, np.random.SeedSequence):
        return int(seed.generate_state(1, dtype=np.uint64)[0])
    return int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint64)[0])


@njit(cache=True)
def keyed_uniform(base, j):
    """Word j of the SplitMix64 sequence from ``base`` as a uniform on (0, 1)."""
    z = mix64(base + (uint64(j) + uint64(1)) * GAMMA)
    return (float(np.int64(z >> uint64(11))) + 0.5) * TWO53_INV


@njit(cache=True)
def keyed_word(base, j):
    """Word j of the SplitMix64 sequence from ``base``, as the state of a stream of its
    own (what a family's ``base_draw`` draws from)."""
    return mix64(base + (uint64(j) + uint64(1)) * GAMMA)


@njit(cache=True)
def ziggurat_word_fast(word):
    """N(0, 1) from one 64-bit word by the ziggurat's fast path (:func:`normal`'s bits),
    or NaN where it rejects (about 1.2%): then :func:`ziggurat_word_slow`."""
    j, mag = ziggurat_split(word)
    return ziggurat_fast(j, mag)


@njit(cache=True)
def ziggurat_word_slow(word):
    """The ziggurat's draw from ``word`` where its fast path rejected, finished from the
    stream seeded by the word."""
    j, mag = ziggurat_split(word)
    return ziggurat_slow(word, j, mag)


# a (fast, slow) pair of draws from one word, the form of a family's ``engine_draw``
# (the normal family's: the latent SMC proposes x_k by it instead of the quantile)
ZIGGURAT = (ziggurat_word_fast, ziggurat_word_slow)
