"""The counter-keyed generators used inside the numba kernels."""

import numpy as np
from scipy import stats

from dpbook import rng


def test_normal_distribution():
    z = rng.normals(123, 1, 400_000)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # the ziggurat tail (|z| > r = 3.654) has the right mass
    p = 2 * stats.norm.sf(rng._ZR)
    k = np.sum(np.abs(z) > rng._ZR)
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
