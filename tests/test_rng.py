"""The counter-keyed generators used inside the numba kernels."""

import numpy as np
from scipy import stats

from dpbook import rng


def test_normal_distribution():
    z = rng.normals(123, 1, 400_000)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # the ziggurat tail (|z| > r = 3.654) has the right mass
    p = 2 * stats.norm.sf(rng.ZR)
    k = np.sum(np.abs(z) > rng.ZR)
    assert abs(k - p * z.size) < 4 * np.sqrt(p * z.size)


def test_uniform_and_gamma():
    assert stats.kstest(rng.uniforms(7, 2, 100_000), "uniform").pvalue > 1e-3
    for shape in (1.0, 3.5, 500.5):
        g = rng.gammas(7, 3, shape, 50_000)
        assert stats.kstest(g, stats.gamma(shape).cdf).pvalue > 1e-3


def test_streams_are_keyed_and_reproducible():
    np.testing.assert_array_equal(rng.normals(5, 1, 100), rng.normals(5, 1, 100))
    a, b = rng.normals(5, 1, 10_000), rng.normals(5, 2, 10_000)
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / np.sqrt(10_000)


def _xoshiro256pp_reference(s, n):
    """xoshiro256++ in plain Python (Blackman & Vigna's reference C code)."""
    m = 2**64 - 1

    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & m

    s, out = list(s), []
    for _ in range(n):
        out.append((rotl((s[0] + s[3]) & m, 23) + s[0]) & m)
        t = (s[1] << 17) & m
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out


def test_xoshiro_matches_reference():
    for seed in ([1, 2, 3, 4], [int(w) for w in rng.xoshiro_seed(7, 3, 5)]):
        st = [np.uint64(w) for w in seed]
        got = []
        for _ in range(50):
            *st, w = rng.xoshiro_next(*st)
            st = [np.uint64(v) for v in st]  # keep the numba signature uint64
            got.append(int(w))
        assert got == _xoshiro256pp_reference(seed, 50)
    assert _xoshiro256pp_reference([1, 2, 3, 4], 2) == [41943041, 58720359]


def test_xoshiro_normal_and_uniform_distribution():
    z = rng.xoshiro_normals(123, 1, 400_000)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    p = 2 * stats.norm.sf(rng.ZR)  # the ziggurat's tail, drawn by the slow path
    k = np.sum(np.abs(z) > rng.ZR)
    assert abs(k - p * z.size) < 4 * np.sqrt(p * z.size)
    assert abs(np.mean(z**4) - 3) < 0.05
    u = rng.xoshiro_uniforms(7, 2, 200_000)
    assert stats.kstest(u, "uniform").pvalue > 1e-3 and 0 < u.min() and u.max() < 1
    a, b = rng.xoshiro_normals(5, 1, 10_000), rng.xoshiro_normals(5, 2, 10_000)
    assert abs(np.corrcoef(a, b)[0, 1]) < 4 / np.sqrt(10_000)


def test_split_ziggurat_is_the_ziggurat_of_normal():
    """ziggurat_split + ziggurat_fast read a word exactly as rng.normal does."""
    state = np.uint64(rng.stream_key(11, 0, 0))
    n_fast = 0
    for _ in range(20_000):
        _, word = rng.next_u64(state)  # the word normal() will use
        state, x = rng.normal(state)
        state = np.uint64(state)
        z = rng.ziggurat_fast(*rng.ziggurat_split(np.uint64(word)))
        if not np.isnan(z):
            assert z == x
            n_fast += 1
    assert 0.98 < n_fast / 20_000 < 0.995
