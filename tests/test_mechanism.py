"""The mechanism of eq. (2)/(10): clipping and the Laplace noise scale (r - l)/eps."""

import numpy as np
import pytest
from scipy import stats

from dpbook.model.mechanisms import clip, noise_logpdf, release, release_one

N = 200_000


def test_noise_scale_pins_laplace_variance():
    # Var(V) for Laplace(scale b) is 2 b^2; the authors' sd-parameterised sampler gives b^2.
    l, r, eps = -1.0, 3.0, 2.0
    b = (r - l) / eps
    y = release(np.ones(N), l, r, eps, np.random.default_rng(1))
    v = y - 1.0
    # sd of the sample variance: sqrt((E V^4 - (E V^2)^2)/N) = sqrt(20/N) b^2
    se = np.sqrt(20.0 / N) * b**2
    assert abs(v.var() - 2 * b**2) < 4 * se
    assert abs(v.var() - b**2) > 20 * se  # the sd-parameterised scale is clearly excluded


def test_noise_distribution_is_laplace():
    l, r, eps = 0.0, 1.0, 5.0
    y = release(np.full(20_000, 0.5), l, r, eps, np.random.default_rng(2))
    assert stats.kstest(y - 0.5, stats.laplace(scale=(r - l) / eps).cdf).pvalue > 1e-3


def test_clipping():
    x = np.array([-5.0, 0.2, 7.0])
    np.testing.assert_array_equal(clip(x, 0.0, 1.0), [0.0, 0.2, 1.0])
    y = release(np.full(N, 100.0), -1.0, 1.0, 1.0, np.random.default_rng(3))
    se = np.sqrt(2 * 2.0**2 / N)
    assert abs(y.mean() - 1.0) < 4 * se


def test_gaussian_mechanism_sd():
    y = release(np.zeros(N), -1.0, 1.0, 4.0, np.random.default_rng(4), mechanism="gaussian")
    assert abs(y.std() - 0.5) < 4 * 0.5 / np.sqrt(2 * N)


def test_privacy_loss_bounded_by_eps():
    # Laplace(y - c) / Laplace(y - c') <= exp(eps) for any c, c' in [l, r] (Theorem 2)
    l, r, eps = -2.0, 1.0, 0.7
    ys = np.linspace(-30, 30, 2001)
    for x, xp in [(-10.0, 10.0), (-1.0, 0.5), (0.0, 0.0)]:
        lp = noise_logpdf(ys, clip(x, l, r), l, r, eps)
        ratio = lp - noise_logpdf(ys, clip(xp, l, r), l, r, eps)
        assert np.all(np.abs(ratio) <= eps + 1e-12)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_release_is_eq10_with_the_mechanisms_draw(mechanism):
    """Y = T_l^r(x) + (r - l)/eps V, V the mechanism's standard draw from the same rng:
    the arithmetic of eq. (10), bit for bit, and one draw per individual."""
    from dpbook.model.mechanisms import get_mechanism

    x, l, r, eps = np.array([-1.0, 0.5, 2.0, 7.0, 3.0]), 0.0, 3.0, 0.7
    y = release(x, l, r, eps, np.random.default_rng(9), mechanism=mechanism)
    v = get_mechanism(mechanism).sample(np.random.default_rng(9), size=5)
    np.testing.assert_array_equal(y, np.clip(x, l, r) + (r - l) / eps * v)


@pytest.mark.parametrize("kw, msg", [
    (dict(eps=0.0), "eps"), (dict(eps=-1.0), "eps"), (dict(eps=np.inf), "eps"),
    (dict(eps=np.nan), "eps"), (dict(l=1.0, r=1.0), "l < r"), (dict(l=2.0, r=1.0), "l < r"),
    (dict(x=np.nan), "finite"), (dict(l=np.nan), "finite"),
])
def test_bad_input(kw, msg):
    args = dict(x=0.0, l=0.0, r=1.0, eps=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        release(args["x"], args["l"], args["r"], args["eps"], np.random.default_rng(0))
    with pytest.raises(ValueError, match="mechanism"):
        release(0.0, 0.0, 1.0, 1.0, np.random.default_rng(0), mechanism="cauchy")


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_release_one_is_release_bit_for_bit(mechanism):
    """The online loop's scalar release: same value and same draw as release()."""
    g = np.random.default_rng(4)
    x, l, w = g.normal(0, 5, 300), g.normal(0, 2, 300), g.exponential(2, 300) + 1e-3
    ra, rb = np.random.default_rng(11), np.random.default_rng(11)
    for xi, li, wi in zip(x.tolist(), l.tolist(), w.tolist()):
        a = float(release(xi, li, li + wi, 2.5, ra, mechanism))
        b = release_one(xi, li, li + wi, 2.5, rb, mechanism)
        assert a == b
    assert ra.random() == rb.random()


@pytest.mark.parametrize("l, r, msg", [(1.0, 1.0, "l < r"), (np.nan, 1.0, "finite"),
                                       (0.0, np.inf, "finite"), ("a", 1.0, "number")])
def test_release_one_bad_interval(l, r, msg):
    with pytest.raises(ValueError, match=msg):
        release_one(0.0, l, r, 1.0, np.random.default_rng(0))
