"""Extreme but legal numbers (issue #13): the exact Fisher information stays right over
the whole supported eps range (against Monte Carlo: test_fisher.test_mc_agrees_with_exact;
here against the noiseless limit), and values outside the supported ranges are refused with
a message that names the range."""

import numpy as np
import pytest
from scipy import integrate, stats

from dpbook.fisher import best_interval, fisher_exact, fisher_mc
from dpbook.validation import EPS_RANGE, MAX_ABS


def test_monte_carlo_standard_error_that_overflows_is_an_error():
    with pytest.raises(ValueError, match="larger K"):
        fisher_mc(-1.0, 1.0, 1e6, M=2000, K=2000, rng=7)


def _noiseless(l, r):
    """F of the clipped normal T(X), X ~ N(0, 1), without noise: the atoms at l and r
    and the density between them (the limit eps -> infinity)."""
    def atom(p, g):
        return np.outer(g, g) / p
    pl, pr = stats.norm.cdf(l), stats.norm.sf(r)
    gl = np.array([-stats.norm.pdf(l), -l * stats.norm.pdf(l)])  # d P(X <= l) / d(mu, sigma)
    gr = np.array([stats.norm.pdf(r), r * stats.norm.pdf(r)])
    inner = np.array([[integrate.quad(lambda x, f=f: stats.norm.pdf(x) * f(x), l, r)[0]
                       for f in row] for row in
                      [[lambda x: x * x, lambda x: x * (x * x - 1)],
                       [lambda x: x * (x * x - 1), lambda x: (x * x - 1) ** 2]]])
    return atom(pl, gl) + atom(pr, gr) + inner


@pytest.mark.parametrize("l, r", [(-1.0, 1.0), (-0.2, 2.5), (0.5, 0.6)])
def test_exact_fisher_tends_to_the_noiseless_limit(l, r):
    """The noise scale B = (r - l)/eps down to 1e-6 (the supported limit): the error
    against the noiseless limit falls like B."""
    F0 = _noiseless(l, r)
    epss = np.minimum((r - l) / np.array([1e-4, 1e-5, 1e-6]), EPS_RANGE[1])
    errs = [np.abs(fisher_exact(l, r, eps) - F0).max() for eps in epss]
    assert errs[-1] < 1e-4 * np.abs(F0).max()
    assert errs[0] > errs[1] > errs[2]
    assert errs[1] / errs[2] > 2  # B falls 5-10 times; the error ~ B (up to log B)


@pytest.mark.parametrize("l, r", [(0.5, 0.6), (2.0, 2.001)])
def test_tiny_noise_scales_tend_to_the_noiseless_limit(l, r):
    """Noise scales below 1e-6 sigma (the closed form's floor) go to the quadrature's
    small-noise rule: the error against the noiseless limit keeps falling like B."""
    F0 = _noiseless(l, r)
    errs = [np.abs(fisher_exact(l, r, eps) - F0).max() / np.abs(F0).max()
            for eps in (1e4, 1e5, 1e6)]
    assert errs[0] > errs[1] > errs[2] and errs[2] < 1e-5


def test_best_interval_at_large_eps():
    """A finite interval inside the search box at any supported eps, also when the grid's
    noise scales are far below the closed form's floor."""
    for eps in (1e4, EPS_RANGE[1]):
        res = best_interval(eps, grid=10)
        assert -3 <= res["a"] < res["b"] <= 3 and np.isfinite(res["score"])
    narrow = best_interval(EPS_RANGE[1], grid=6, lims=(0.0, 1e-3))  # noise scales ~1e-10
    assert 0.0 <= narrow["a"] < narrow["b"] <= 1e-3 and np.isfinite(narrow["score"])


@pytest.mark.parametrize("eps", [0.0, -1.0, 1e-5, 2e6, 1e308, np.inf, np.nan])
def test_eps_outside_the_range_is_refused(eps):
    with pytest.raises(ValueError, match=r"eps must be"):
        fisher_exact(-1.0, 1.0, eps)


@pytest.mark.parametrize("l, r, what", [(-1e300, 1e300, "must lie in"),
                                        (-10 * MAX_ABS, 1.0, "must lie in"),
                                        (0.0, 1e-300, "too narrow"),
                                        (1e6, 1e6 + 1e-6, "too narrow")])
def test_intervals_outside_the_range_are_refused(l, r, what):
    with pytest.raises(ValueError, match=what):
        fisher_exact(l, r, 1.0)


@pytest.mark.parametrize("args, what", [
    (["--a", "-1e308", "--b", "1e308"], "must lie in"),
    (["--a", "-1e-300", "--b", "1e-300"], "too narrow"),
    (["--a", "-1", "--b", "1", "--family", "student_t", "--df", "1e308"], "df must be in"),
    (["--a", "-1", "--b", "1", "--family", "student_t", "--df", "1e-300"], "df must be in"),
    (["--a", "-1", "--b", "1", "--theta", "0", "1e-300"], "sigma must lie in"),
    (["--a", "-1", "--b", "1", "--theta", "1e300", "1"], "mu must lie in"),
])
def test_cli_names_the_supported_range(capsys, args, what):
    """Scientific-notation negatives are numbers, and values outside the supported
    ranges get a one-line error naming the range (no NaN printed, exit status 2)."""
    from dpbook.cli import main

    assert main(["fisher", "--eps", "1", *args, "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpbook: error: ") and what in err and err.count("\n") == 1


@pytest.mark.parametrize("eps", [1e5, 1e6])
def test_generic_small_noise_rule_matches_the_closed_form(eps):
    from dpbook.likelihood import fisher_quadrature

    closed = fisher_exact(-1.0, 1.0, eps)
    generic = fisher_quadrature.fisher_exact(-1.0, 1.0, eps, (0.0, 1.0), "normal", "laplace")
    np.testing.assert_allclose(generic, closed, rtol=3e-5, atol=1e-12)
