"""Property-based tests (hypothesis): over the public API's numeric parameters and the
command line's numeric arguments, every call either returns finite numbers that pass
sanity checks or fails with a one-line ValueError (issue #13).

The examples are derandomised (the same every run) and mix ordinary values with the
float limits, tiny and huge magnitudes, zeros, infinities and NaN.
"""

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpbook.cli import main
from dpbook.fisher import best_interval, fisher_exact, fisher_mc
from dpbook.model.families import get_family
from dpbook.model.mechanisms import release
from dpbook.posterior import exact_posterior
from dpbook.smc import smc_posterior

pytestmark = pytest.mark.slow

SETTINGS = settings(derandomize=True, deadline=None, database=None, max_examples=40,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
EXTREMES = [0.0, -0.0, 1e-300, -1e-300, 1e-12, 1e12, 1e100, -1e100, 1e300, -1e300, 1e308,
            -1e308, math.inf, -math.inf, math.nan]
number = st.one_of(st.floats(-20, 20), st.sampled_from(EXTREMES),
                   st.floats(allow_nan=True, allow_infinity=True))
positive = st.one_of(st.floats(0.05, 50), st.sampled_from(EXTREMES),
                     st.floats(min_value=0, allow_infinity=True))


def _outcome(call):
    """The result of ``call()``, or None when it raised a one-line ValueError."""
    try:
        return call()
    except ValueError as e:
        assert str(e) and "\n" not in str(e), repr(e)
        return None


def _check_information(F):
    F = np.asarray(F, float)
    assert np.isfinite(F).all(), F
    np.testing.assert_allclose(F, np.swapaxes(F, -1, -2), rtol=1e-9, atol=1e-300)
    ev = np.linalg.eigvalsh(F)
    assert (ev >= -1e-9 * max(1.0, np.abs(ev).max())).all(), ev


@SETTINGS
@given(l=number, width=positive, eps=positive, mu=number, sigma=positive)
def test_exact_fisher_is_finite_and_psd_or_an_error(l, width, eps, mu, sigma):
    F = _outcome(lambda: fisher_exact(l, l + width, eps, theta=(mu, sigma)))
    if F is not None:
        _check_information(F)


@SETTINGS
@given(l=number, width=positive, eps=positive,
       family=st.sampled_from(["laplace", "student_t", "poisson"]),
       mechanism=st.sampled_from(["laplace", "gaussian"]))
def test_exact_fisher_of_other_families(l, width, eps, family, mechanism):
    fam = get_family(family)
    F = _outcome(lambda: fisher_exact(l, l + width, eps, family=fam, mechanism=mechanism,
                                      theta=fam.default_theta()))
    if F is not None:
        _check_information(F)


@SETTINGS
@given(l=number, width=positive, eps=positive, M=st.integers(1, 50), K=st.integers(1, 200))
def test_monte_carlo_fisher_is_finite_and_psd_or_an_error(l, width, eps, M, K):
    est = _outcome(lambda: fisher_mc(l, l + width, eps, M=M, K=K, rng=1))
    if est is not None:
        _check_information(est.F)


@SETTINGS
@given(eps=positive, grid=st.integers(2, 12))
def test_best_interval_lies_inside_the_limits_or_an_error(eps, grid):
    res = _outcome(lambda: best_interval(eps, grid=grid))
    if res is not None:
        assert -3.0 <= res["a"] < res["b"] <= 3.0
        assert math.isfinite(res["score"]) and res["score"] >= 0


observations = st.lists(st.tuples(number, number, positive), min_size=1, max_size=4)


def _data(obs):
    y = np.array([o[0] for o in obs])
    l = np.array([o[1] for o in obs])
    with np.errstate(over="ignore"):  # l + width may overflow: an input like any other
        r = l + np.array([o[2] for o in obs])
    return y, l, r


def _check_summary(s):
    for p in ("mu", "sigma"):
        assert math.isfinite(s[p]["mean"]) and math.isfinite(s[p]["sd"]) and s[p]["sd"] >= 0
    assert s["sigma"]["mean"] > 0


@SETTINGS
@given(obs=observations, eps=positive)
def test_exact_posterior_is_finite_or_an_error(obs, eps):
    post = _outcome(lambda: exact_posterior(*_data(obs), eps))
    if post is not None:
        _check_summary(post.summary())


@SETTINGS
@given(obs=observations, eps=positive)
def test_smc_posterior_is_finite_or_an_error(obs, eps):
    smc = _outcome(lambda: smc_posterior(*_data(obs), eps, n_particles=20, seed=0))
    if smc is not None:
        _check_summary(smc.summary())


@SETTINGS
@given(x=st.lists(number, min_size=1, max_size=5), l=number, width=positive, eps=positive)
def test_release_is_finite_or_an_error(x, l, width, eps):
    y = _outcome(lambda: release(np.array(x), l, l + width, eps, 0))
    if y is not None:
        assert np.isfinite(y).all()


def _cli(capsys, args):
    code = main(args)
    out, err = capsys.readouterr()
    if code == 2:
        assert err.startswith("dpbook: error: ") and err.count("\n") == 1, err
        return None
    assert code == 0 and "dpbook: error" not in err
    assert "nan" not in out.lower() and "inf" not in out.lower(), out
    return json.loads(out)


@SETTINGS
@given(eps=st.one_of(positive, number), a=number, b=number,
       method=st.sampled_from(["exact", "mc"]))
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_cli_fisher(capsys, eps, a, b, method):
    args = ["fisher", "--eps", repr(eps), "--a", repr(a), "--b", repr(b), "--method",
            method, "--M", "30", "--K", "100", "--json"]
    out = _cli(capsys, args)
    if out is not None:
        _check_information(np.array(out["F"]))


@SETTINGS
@given(eps=st.one_of(positive, number))
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_cli_best_interval(capsys, eps):
    out = _cli(capsys, ["best-interval", "--eps", repr(eps), "--grid", "8", "--json"])
    if out is not None:
        assert out["a"] < out["b"]
