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


def test_ziggurat_from_keyed_words_is_normal():
    """rng.ZIGGURAT, the normal family's draw of x_k's proposal in the latent SMC: one
    keyed word per draw, the fast path and the slow one where it rejects."""
    from numba import njit

    fast, slow = rng.ZIGGURAT

    @njit
    def draws(base, n):
        out = np.empty(n)
        for j in range(n):
            w = rng.keyed_word(base, j)
            z = fast(w)
            out[j] = z if z == z else slow(w)
        return out

    z = draws(np.uint64(rng.stream_key(123, 1, 0)), 400_000)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    p = 2 * stats.norm.sf(rng.ZR)  # the ziggurat's tail, drawn by the slow path
    k = np.sum(np.abs(z) > rng.ZR)
    assert abs(k - p * z.size) < 4 * np.sqrt(p * z.size)
    assert abs(np.mean(z**4) - 3) < 0.05


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
