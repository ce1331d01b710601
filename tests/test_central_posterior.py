"""The posterior given a central release (dpbook.posterior.central_grid): the clipped
moments, the likelihood's quadrature, the normal approximation of the sums against
simulation at the chapter's smallest n, and the posterior against the non-private one."""

import math

import numpy as np
import pytest
from scipy import stats

from dpbook.calibration.replication import naive_posterior
from dpbook.model.central_release import CentralRelease, noise_scales
from dpbook.model.prior import LocationScalePrior
from dpbook.posterior import central_posterior
from dpbook.posterior.central_grid import clipped_moments, log_likelihood, sum_cdf, sum_moments
from dpbook.privacy.central_curator import family_release

NARROW = LocationScalePrior(0.0, 1.0, 1.0, 1.0)


@pytest.mark.parametrize("mu, sigma, l, r", [(0.0, 1.0, -8.0, 8.0), (3.0, 4.0, -8.0, 8.0),
                                              (50.0, 3.0, 45.0, 52.0), (-20.0, 1.0, 0.0, 1.0)])
def test_clipped_moments_match_simulation(mu, sigma, l, r):
    z = np.clip(np.random.default_rng(1).normal(mu, sigma, 400_000), l, r) - 0.5 * (l + r)
    for k, m in enumerate(clipped_moments(mu, sigma, l, r), start=1):
        se = np.std(z**k) / math.sqrt(z.size)
        assert abs(np.mean(z**k) - m) <= 5 * se + 1e-12 * (0.5 * (r - l)) ** k


def _mc_likelihood(rel, mu, sigma, rng, size=1_000_000):
    """p(y | theta) under the normal approximation by Monte Carlo, the better of two
    estimators (over the sums, or over the noise) and its standard error."""
    m1, m2, v1, v2, c12 = (float(v) for v in sum_moments(mu, sigma, rel.n, rel.l, rel.r))
    cov = np.array([[v1, c12], [c12, v2]])
    s = rng.multivariate_normal([m1, m2], cov, size=size)
    over_sums = np.exp(-np.abs(rel.y1 - s[:, 0]) / rel.b1 - np.abs(rel.y2 - s[:, 1]) / rel.b2) \
        / (4 * rel.b1 * rel.b2)
    noise = rng.laplace(0.0, [rel.b1, rel.b2], size=(size, 2))
    over_noise = stats.multivariate_normal([m1, m2], cov).pdf(np.array([rel.y1, rel.y2]) - noise)
    est = [(e.mean(), e.std() / math.sqrt(size)) for e in (over_sums, over_noise)]
    return min(est, key=lambda e: e[1] / e[0])


@pytest.mark.slow
@pytest.mark.parametrize("n, b1, b2", [(10, 32.0, 128.0), (100, 3.0, 10.0), (1000, 0.5, 0.3),
                                       (10, 0.1, 0.1)])
def test_likelihood_quadrature_matches_monte_carlo(n, b1, b2):
    mu, sigma, l, r = 0.5, 2.0, -8.0, 8.0
    m1, m2, v1, v2, _ = (float(v) for v in sum_moments(mu, sigma, n, l, r))
    rel = CentralRelease(y1=m1 + 1.3 * math.sqrt(v1) + b1, y2=m2 - 0.7 * math.sqrt(v2), n=n,
                         l=l, r=r, b1=b1, b2=b2, eps=1.0)
    est, se = _mc_likelihood(rel, mu, sigma, np.random.default_rng(2))
    ll = float(log_likelihood(rel, mu, sigma))
    assert abs(math.exp(ll) - est) <= 5 * se
    exact = float(log_likelihood(rel, mu, sigma, nodes=128))
    assert ll == pytest.approx(exact, abs=1e-4)
    assert float(log_likelihood(rel, mu, sigma, nodes=16)) == pytest.approx(exact, abs=1e-3)


def test_likelihood_broadcasts_over_a_grid():
    rel = CentralRelease(y1=3.0, y2=40.0, n=20, l=-4.0, r=4.0, b1=2.0, b2=5.0, eps=1.0)
    mus, sig = np.linspace(-1, 1, 4), np.linspace(0.5, 3, 3)
    grid = log_likelihood(rel, mus[:, None], sig[None, :])
    assert grid.shape == (4, 3)
    assert grid[2, 1] == pytest.approx(float(log_likelihood(rel, mus[2], sig[1])), rel=1e-12)


def _ks_of_approximation(mu, sigma, eps, n=10, l=-8.0, r=8.0, reps=4000, seed=1):
    """KS p-values of simulated y_1 and y_2 against the normal approximation's marginals
    (each sum with its Laplace noise, the even split of eps)."""
    rng = np.random.default_rng(seed)
    z = np.clip(rng.normal(mu, sigma, (reps, n)), l, r) - 0.5 * (l + r)
    b1, b2 = noise_scales(l, r, eps)
    y1 = z.sum(1) + rng.laplace(0, b1, reps)
    y2 = (z * z).sum(1) + rng.laplace(0, b2, reps)
    return (stats.kstest(y1, lambda y: sum_cdf(1, y, mu, sigma, n, l, r, b1)).pvalue,
            stats.kstest(y2, lambda y: sum_cdf(2, y, mu, sigma, n, l, r, b2)).pvalue)


@pytest.mark.parametrize("mu, sigma, eps", [(0.0, 1.0, 0.1), (0.0, 1.0, 1.0), (3.0, 4.0, 1.0)])
def test_normal_approximation_holds_at_n10_with_noise(mu, sigma, eps):
    """At n = 10 (the chapter's smallest), with the noise of eps <= 1, 4000 simulated
    releases are not told from the approximation (KS p > 1e-3 for each sum)."""
    assert min(_ks_of_approximation(mu, sigma, eps)) > 1e-3


def test_normal_approximation_breaks_at_n10_without_noise():
    """... and without noise (eps = 1000) the sum of squares' skew shows: the
    approximation is rejected for s_2 (this is where it breaks)."""
    p1, p2 = _ks_of_approximation(0.0, 1.0, 1000.0)
    assert p2 < 1e-6


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_posterior_without_noise_is_the_non_private_one(n):
    """eps = 10^4 and an interval that clips nothing: the central posterior is the
    posterior given x (conjugate model on a grid), up to the normal approximation of
    the sums (at n = 10 the sum of squares is chi-square, not normal)."""
    rel = family_release("normal", (0.3, 1.5), n, 1e4, seed=3, interval=(-30.0, 30.0))
    data = np.random.SeedSequence(3).spawn(2)[0]
    x = 0.3 + 1.5 * np.random.default_rng(data).standard_normal(n)
    post, ref = central_posterior(rel, prior=NARROW), naive_posterior(x, prior=NARROW)
    q, q_ref = post.quantile([0.1, 0.5, 0.9]), ref.quantile([0.1, 0.5, 0.9])
    width = q_ref[2] - q_ref[0]
    tol = np.array([0.05, 0.15]) if n == 10 else np.array([0.02, 0.03])
    assert np.all(np.abs(q - q_ref) <= tol * width)
    assert post.edge < -25  # the box holds the posterior


def test_noise_aware_posterior_is_wider_than_the_naive_one():
    rel = family_release("normal", (50.0, 10**0.5), 1000, 1.0, seed=1, interval=(18.4, 81.6))
    aware, naive = central_posterior(rel), central_posterior(rel, naive=True)
    q, qn = aware.quantile([0.25, 0.75]), naive.quantile([0.25, 0.75])
    assert np.all(q[1] - q[0] > 1.5 * (qn[1] - qn[0]))
    assert aware.edge < -25 and naive.edge < -25
    assert aware.cdf((50.0, 10**0.5)).min() > 0.01


@pytest.mark.slow
@pytest.mark.parametrize("eps, n", [(0.1, 10_000), (1.0, 3000), (5.0, 10)])
def test_narrow_and_wide_posteriors_are_found(eps, n):
    """A posterior far narrower than the first scan's spacing (large n, an interval at
    the truth +- 2 sigma) is found from the moment start; a broad one (n = 10) is held by
    the box too; the truth is inside the central 99% interval and the quartiles do not
    move on a finer grid with more quadrature nodes."""
    mu, sigma = 50.0, 10**0.5
    rel = family_release("normal", (mu, sigma), n, eps, seed=[0, 10, 1],
                         interval=(mu - 2 * sigma, mu + 2 * sigma))
    post = central_posterior(rel)
    assert post.edge < -17  # at n = 10 the prior's sigma^-3 tail reaches the box's limit
    u = post.cdf((mu, sigma))
    assert np.all((u > 0.005) & (u < 0.995)), u
    q, q_fine = post.quantile([0.25, 0.75]), central_posterior(rel, grid=241, nodes=64).quantile(
        [0.25, 0.75])
    assert np.all(np.abs(q - q_fine) < 0.01 * (q[1] - q[0]))


def test_prior_must_be_a_prior():
    rel = CentralRelease(y1=3.0, y2=40.0, n=20, l=-4.0, r=4.0, b1=2.0, b2=5.0, eps=1.0)
    with pytest.raises(ValueError, match="prior must be a LocationScalePrior"):
        central_posterior(rel, prior=(0, 1))
