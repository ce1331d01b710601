"""The central release (chapter 11): sensitivities and noise scales against OpenDP's,
the Laplace noise, the private quantiles' eps-DP ratio, and the input checks."""

import math

import numpy as np
import opendp.prelude as opendp
import pytest
from scipy import stats

from dpbook.model.central_release import CentralRelease, noise_scales, sum_sensitivities
from dpbook.privacy.central_curator import (
    family_release,
    private_quantile,
    quantile_gap_weights,
    release_central,
    release_sums,
)


def test_sensitivities_under_substitution():
    d1, d2 = sum_sensitivities(-8.0, 8.0)
    assert (d1, d2) == (16.0, 64.0)
    # brute force: max over z, z' in [-h, h] of |z - z'| and |z^2 - z'^2|
    z = np.linspace(-8.0, 8.0, 401)
    assert np.max(np.abs(z[:, None] - z[None, :])) == d1
    assert np.max(np.abs(z[:, None] ** 2 - z[None, :] ** 2)) == d2
    b1, b2 = noise_scales(-8.0, 8.0, 1.0, share=0.25)
    assert b1 == pytest.approx(16.0 / 0.25) and b2 == pytest.approx(64.0 / 0.75)


def test_one_vector_laplace_would_need_the_tight_joint_sensitivity():
    # the alternative the docstring compares with: the L1 sensitivity of the pair is
    # (1 + r - l)^2 / 4 for r - l >= 1 (72.25 at [-8, 8]), B&S's bound 16 + 64 = 80
    z = np.linspace(-8.0, 8.0, 1601)
    joint = np.abs(z[:, None] - z[None, :]) + np.abs(z[:, None] ** 2 - z[None, :] ** 2)
    assert joint.max() == pytest.approx((1 + 16.0) ** 2 / 4, rel=1e-6)
    assert joint.max() < sum(sum_sensitivities(-8.0, 8.0))


def _opendp_scale(n, lower, upper, eps, d_in=2):
    """OpenDP's Laplace scale for the sum of n values bounded in [lower, upper] (size
    known) that is eps-DP at symmetric distance d_in (a substitution is d_in = 2)."""
    dp = opendp
    dp.enable_features("contrib")
    space = (dp.vector_domain(dp.atom_domain(bounds=(lower, upper)), size=n),
             dp.symmetric_distance())
    summed = space >> dp.t.then_sum()
    return dp.binary_search_param(lambda s: summed >> dp.m.then_laplace(scale=s),
                                  d_in=d_in, d_out=eps)


@pytest.mark.parametrize("l, r, eps, share, n", [(-8.0, 8.0, 1.0, 0.5, 100),
                                                  (18.4, 81.6, 0.1, 0.7, 1000),
                                                  (-0.5, 2.0, 5.0, 0.3, 10)])
def test_noise_scales_match_opendp(l, r, eps, share, n):
    """b_1 and b_2 are OpenDP's scales for the same sized, bounded sums at d_in = 2.
    OpenDP adds a slack for floating-point summation (about n ulp of the bound, 1e-12
    relative here): the tolerance is 1e-6 relative, and OpenDP's scale is never smaller."""
    b1, b2 = noise_scales(l, r, eps, share)
    h = (r - l) / 2
    o1 = _opendp_scale(n, -h, h, share * eps)
    o2 = _opendp_scale(n, 0.0, h * h, (1 - share) * eps)
    assert o1 == pytest.approx(b1, rel=1e-6) and o1 >= b1 * (1 - 1e-12)
    assert o2 == pytest.approx(b2, rel=1e-6) and o2 >= b2 * (1 - 1e-12)


def test_opendp_neighbour_distance_one_is_not_a_substitution():
    """The trap the chapter avoids: on a data set of known size, d_in = 1 (one addition
    or removal, impossible at fixed n) gives a sum almost no sensitivity."""
    dp = opendp
    dp.enable_features("contrib")
    space = (dp.vector_domain(dp.atom_domain(bounds=(-8.0, 8.0)), size=50),
             dp.symmetric_distance())
    summed = space >> dp.t.then_sum()
    assert summed.map(1) < 1e-6 < 16.0 <= summed.map(2) < 16.0 * (1 + 1e-9)


def test_released_noise_is_laplace_with_the_stated_scales():
    x = np.random.default_rng(1).normal(0.0, 3.0, 50)
    l, r, eps, share = -4.0, 4.0, 1.0, 0.5
    z = np.clip(x, l, r)
    rng = np.random.default_rng(2)
    draws = np.array([release_sums(x, l, r, eps, rng, share)[:2] for _ in range(4000)])
    b1, b2 = noise_scales(l, r, eps, share)
    assert stats.kstest(draws[:, 0] - z.sum(), stats.laplace(scale=b1).cdf).pvalue > 1e-3
    assert stats.kstest(draws[:, 1] - (z * z).sum(), stats.laplace(scale=b2).cdf).pvalue > 1e-3


def _quantile_density(values, q, eps, lo, hi, v):
    edges, logw = quantile_gap_weights(values, q, eps, lo, hi)
    lengths = np.diff(edges)
    logz = np.log(np.sum(np.exp(logw)))
    k = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, lengths.size - 1)
    return logw[k] - np.log(lengths[k]) - logz  # log density at v


def test_private_quantile_is_eps_dp_on_neighbours():
    """The log density of the output at any v changes by at most eps when one person
    is substituted (the exponential mechanism with a sensitivity-1 utility)."""
    rng = np.random.default_rng(3)
    lo, hi, eps = -10.0, 10.0, 0.7
    v = np.linspace(lo + 1e-9, hi - 1e-9, 4001)
    worst = 0.0
    for _ in range(200):
        x = rng.normal(0.0, 2.0, rng.integers(1, 30))
        xp = x.copy()
        xp[rng.integers(x.size)] = rng.uniform(-15, 15)
        for q in (0.05, 0.5, 0.95):
            d = _quantile_density(x, q, eps, lo, hi, v) - _quantile_density(xp, q, eps, lo, hi, v)
            worst = max(worst, float(np.max(np.abs(d))))
    assert worst <= eps + 1e-9
    assert worst > 0.5 * eps  # the bound is reached in part: the check can fail


def test_private_quantile_draws_follow_the_gap_probabilities():
    x = np.array([-3.0, -1.0, 0.5, 2.0, 6.0])
    lo, hi, q, eps = -10.0, 10.0, 0.5, 2.0
    edges, logw = quantile_gap_weights(x, q, eps, lo, hi)
    p = np.exp(logw - logw.max())
    p /= p.sum()
    rng = np.random.default_rng(4)
    draws = np.array([private_quantile(x, q, eps, lo, hi, rng) for _ in range(20_000)])
    counts = np.histogram(draws, bins=edges)[0]
    assert stats.chisquare(counts, p * draws.size).pvalue > 1e-3


def test_release_central_splits_eps():
    x = np.random.default_rng(5).normal(50.0, 3.0, 200)
    fixed = release_central(x, 1.0, 6, interval=(40.0, 60.0), sum_share=0.5)
    assert fixed.eps_interval == 0.0 and (fixed.l, fixed.r) == (40.0, 60.0)
    assert (fixed.b1, fixed.b2) == noise_scales(40.0, 60.0, 1.0, 0.5)
    private = release_central(x, 1.0, 6, bounds=(0.0, 100.0), interval_share=0.3)
    assert private.eps_interval == pytest.approx(0.3)
    assert (private.b1, private.b2) == pytest.approx(noise_scales(private.l, private.r, 0.7))
    assert 0.0 <= private.l < private.r <= 100.0
    # with a larger eps the private 5% and 95% quantiles land near the data's; at eps = 1
    # the wide gaps between the bounds and the data still weigh (the chapter's point)
    sharp = release_central(x, 20.0, 6, bounds=(0.0, 100.0), interval_share=0.3)
    assert abs(sharp.l - np.quantile(x, 0.05)) < 1 and abs(sharp.r - np.quantile(x, 0.95)) < 1


def test_family_release_sees_the_populations_people():
    from dpbook.privacy.population import family_population

    pop = family_population("normal", (1.0, 2.0), 40, 1e6, seed=11)
    x = np.array([pop.release(-1e3, 1e3) for _ in range(40)])  # eps 1e6: noise ~1e-3
    rel = family_release("normal", (1.0, 2.0), 40, 1e6, seed=11, interval=(-1e3, 1e3))
    assert rel.y1 == pytest.approx(x.sum(), abs=0.1)
    assert rel.y2 == pytest.approx((x * x).sum(), abs=0.5)


def test_family_release_sees_the_same_people_after_the_population_spawned():
    # a SeedSequence is advanced by each spawn; the curator still takes the people a
    # fresh seed gives the population (the calibration hands both one SeedSequence)
    from dpbook.privacy.population import family_population

    ss = np.random.SeedSequence(11)
    pop = family_population("normal", (1.0, 2.0), 40, 1e6, seed=ss)
    x = np.array([pop.release(-1e3, 1e3) for _ in range(40)])  # eps 1e6: noise ~1e-3
    rel = family_release("normal", (1.0, 2.0), 40, 1e6, seed=ss, interval=(-1e3, 1e3))
    assert rel.y1 == pytest.approx(x.sum(), abs=0.1)
    assert rel.y2 == pytest.approx((x * x).sum(), abs=0.5)


@pytest.mark.parametrize("kw, message", [
    (dict(interval=(1.0, 0.0)), "interval must have l < r"),
    (dict(interval=(0.0, 1.0), bounds=(0.0, 2.0)), "not both"),
    (dict(), "needs public bounds"),
    (dict(bounds=(0.0, 1.0), interval_share=1.0), "interval_share must be"),
    (dict(bounds=(0.0, 1.0), quantiles=(0.9, 0.1)), "quantiles must satisfy"),
    (dict(interval=(0.0, 1.0), sum_share=0), "sum_share must be"),
])
def test_bad_input_is_one_line(kw, message):
    with pytest.raises(ValueError, match=message) as err:
        release_central([0.1, 0.2], 1.0, 0, **kw)
    assert "\n" not in str(err.value)


def test_release_record_checks():
    with pytest.raises(ValueError, match="y1"):
        CentralRelease(y1=math.nan, y2=0.0, n=3, l=0.0, r=1.0, b1=1.0, b2=1.0, eps=1.0)
    rel = CentralRelease(y1=1.0, y2=0.5, n=3, l=2.0, r=6.0, b1=1.0, b2=1.0, eps=1.0)
    assert (rel.centre, rel.half_width) == (4.0, 2.0)
