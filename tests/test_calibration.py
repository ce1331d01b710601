"""Simulation-based calibration (dpbook.calibration): the exact posterior passes, the
posteriors that ignore the mechanism or mis-scale its noise are caught.

Each study uses fixed seeds, so each test is deterministic; the thresholds are chosen
from the false-alarm rate a test would have over random seeds (stated per test)."""

import math

import numpy as np
import pytest
from scipy import stats

from dpbook import calibration as cal

L, R = -300.0, 300.0  # a fixed interval that does not depend on theta (prior sd of mu: 100)


def study(method, reps, eps, n, seed0=0):
    res = [cal.replicate(method, eps, n, L, R, seed=seed0 + k, grid=(41, 41))
           for k in range(reps)]
    return {p: np.array([r[p] for r in res]) for p in cal.PARAMS}


@pytest.mark.slow
def test_exact_posterior_is_calibrated():
    # Under a correct posterior the PIT values are uniform and the KS p-value is uniform
    # too: failing below 0.005 for either parameter is a 1% false alarm over seeds.
    u = study("exact", reps=80, eps=10.0, n=30)
    for p in cal.PARAMS:
        s = cal.summarize_pit(u[p])
        assert s["ks_p"] > 0.005, (p, s)


def test_naive_posterior_is_caught():
    # Treating y as x puts the noise into sigma: with 20 replications every PIT of sigma
    # is at the top; the KS p-value is below 1e-6 (its false-alarm rate).
    u = study("naive", reps=20, eps=10.0, n=30)
    assert cal.summarize_pit(u["sigma"])["ks_p"] < 1e-6


@pytest.mark.slow
def test_original_code_noise_scale_is_caught():
    # Releases with noise sqrt(2) smaller than the likelihood assumes multiply the
    # Laplace log-likelihood by 1/sqrt(2): where it dominates the prior the posterior of
    # mu is 2^(1/4) = 1.19 times too wide, its 50% interval covers about 0.58 of the
    # time, and the mean of (PIT - 1/2)^2 falls below 1/12 by about 0.19 of its
    # per-value sd.  With 300 replications the one-sided z-test at p < 0.01 (false-alarm
    # rate 1% under a correct posterior) has power about 0.8.
    u = study("original-code", reps=300, eps=10.0, n=20)
    z = cal.summarize_pit(u["mu"])["dispersion_z"]
    assert stats.norm.cdf(z) < 0.01, z


def test_summary_and_band_on_uniform_values():
    rng = np.random.default_rng(3)
    s = cal.summarize_pit(rng.uniform(size=400))
    assert s["reps"] == 400 and s["ks_p"] > 0.01
    assert abs(s["coverage50"] - 0.5) < 4 * s["coverage50_se"]
    assert abs(s["dispersion_z"]) < 4
    z, lo, hi = cal.ecdf_band(50, alpha=0.05, simulations=4000, rng=1)
    assert lo[0] == hi[0] == 0 and lo[-1] == hi[-1] == 1
    assert np.all(lo <= z + 1e-12) and np.all(hi >= z - 1e-12)
    # the band is simultaneous: about 95% of uniform ECDFs stay inside it everywhere
    ecdfs = (np.sort(rng.uniform(size=(2000, 50)), axis=1)[:, :, None] <= z).mean(axis=1)
    inside = np.mean(np.all((ecdfs >= lo - 1e-12) & (ecdfs <= hi + 1e-12), axis=1))
    assert abs(inside - 0.95) < 0.025, inside  # 0.025: about 5 binomial se at 2000


def test_prior_draws_follow_the_prior():
    mu, sigma = cal.draw_theta(np.random.default_rng(0), size=20000)
    assert stats.kstest(mu, "norm", args=(0.0, 100.0)).pvalue > 0.001
    assert stats.kstest(sigma**2, stats.invgamma(1.0, scale=1.0).cdf).pvalue > 0.001


def test_bad_inputs():
    with pytest.raises(ValueError, match="method"):
        cal.replicate("smc", 1.0, 10, L, R, seed=0)  # not a method name
    with pytest.raises(ValueError):
        cal.replicate("exact", -1.0, 10, L, R, seed=0)
    with pytest.raises(ValueError, match="PIT"):
        cal.summarize_pit([0.2, 1.5])
    assert math.isfinite(cal.replicate("exact", 1.0, 10, L, R, seed=0)["mu"])


@pytest.mark.slow
@pytest.mark.parametrize("method", ["smc-adaptive", "smc-fixed", "mhaar"])
def test_samplers_pass_a_small_study(method):
    # The samplers approximate the exact posterior; a small study (60 replications)
    # catches gross errors only.  Threshold 0.001 for each of two parameters: a false
    # alarm rate of 0.2% for an exact posterior.
    res = [cal.replicate(method, 10.0, 30, L, R, seed=k, particles=300, mhaar_iters=4000)
           for k in range(60)]
    for p in cal.PARAMS:
        s = cal.summarize_pit([r[p] for r in res])
        assert s["ks_p"] > 0.001, (method, p, s)


def test_sample_cdf_is_the_weighted_rank():
    assert cal.sample_cdf([1.0, 2.0, 3.0], 2.5) == pytest.approx(2 / 3)
    assert cal.sample_cdf([1.0, 2.0, 3.0], 2.0) == pytest.approx(1.5 / 3)
    assert cal.sample_cdf([1.0, 2.0], 1.5, weights=[3.0, 1.0]) == pytest.approx(0.75)
