"""Issue #29, second sweep: input that is accepted but means something else, tracebacks
on faults, processes left behind, and unhelpful messages.  Every bad input gives one
line naming the problem (exit status 2 and ``dpbook: error: ...`` on the command line,
ValueError in Python).  Examples are generated (hypothesis, derandomised) where a
generator fits: API argument types, option values, CSV cells."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpbook.cli import main

SETTINGS = settings(derandomize=True, deadline=None, database=None, max_examples=25,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

Y, L, R = np.array([0.3, -0.2, 1.4]), -np.ones(3), np.ones(3)

# numbers that float() takes but that mean something else: a boolean is not the number
# 1, a complex number would lose its imaginary part, digits of other scripts are not
# what a CSV reader or most other tools read (dpbook reads ASCII numerals only)
non_ascii_digits = st.text(st.characters(categories=["Nd"], exclude_characters="0123456789"),
                           min_size=1, max_size=3)
not_real = st.one_of(
    st.booleans(), st.sampled_from([np.bool_(True), np.bool_(False)]),
    st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=10),
    st.builds(np.complex128, st.floats(0.5, 5)),
    non_ascii_digits)


def _api_calls():
    from dpbook.fisher import best_interval, fisher_exact, fisher_mc
    from dpbook.gradient import OnlineGradient
    from dpbook.marginal import marginal_posterior
    from dpbook.mechanisms import release
    from dpbook.mhaar import mhaar
    from dpbook.posterior import exact_posterior
    from dpbook.smc import smc_posterior

    return {
        "exact_posterior": lambda eps: exact_posterior(Y, L, R, eps),
        "smc_posterior": lambda eps: smc_posterior(Y, L, R, eps, n_particles=20),
        "mhaar": lambda eps: mhaar(Y, L, R, eps, n_iter=50),
        "marginal_posterior": lambda eps: marginal_posterior(Y, L, R, eps, n_particles=20),
        "fisher_exact": lambda eps: fisher_exact(-1.0, 1.0, eps),
        "fisher_mc": lambda eps: fisher_mc(-1.0, 1.0, eps, M=5, K=5, rng=0),
        "best_interval": lambda eps: best_interval(eps, grid=3),
        "OnlineGradient": lambda eps: OnlineGradient(eps),
        "release": lambda eps: release(Y, -1.0, 1.0, eps, 0),
    }


@pytest.mark.parametrize("entry", list(_api_calls()))
@SETTINGS
@given(bad=not_real)
def test_eps_that_is_not_a_real_number_is_refused(entry, bad):
    """eps=True ran as eps = 1, eps=2+0j as 2, eps='٥' as 5."""
    with pytest.raises(ValueError, match="^eps must be"):
        _api_calls()[entry](bad)


@SETTINGS
@given(bad=not_real, where=st.sampled_from(["y", "l", "r"]), pos=st.integers(0, 2))
def test_data_that_are_not_real_numbers_are_refused(bad, where, pos):
    """A complex y kept its real part (with only numpy's ComplexWarning); a boolean
    counted as 0 or 1."""
    from dpbook.posterior import exact_posterior

    cols = {"y": list(Y), "l": list(L), "r": list(R)}
    cols[where][pos] = bad
    with pytest.raises(ValueError, match=f"{where}|interval"):
        exact_posterior(cols["y"], cols["l"], cols["r"], 1.0)


@pytest.mark.parametrize("values", [np.array([True, False, True]), Y + 0j, Y + 1j,
                                    [0.3, True, 1.4], [0.3, 1j, 1.4]])
def test_whole_arrays_of_booleans_or_complex_numbers_are_refused(values):
    from dpbook.smc import smc_posterior

    with pytest.raises(ValueError, match="^y must be"):
        smc_posterior(values, L, R, 1.0, n_particles=20)


@pytest.mark.parametrize("family, theta", [("normal", (True, 1.0)), ("normal", (0.0, 1 + 0j)),
                                           ("poisson", (np.bool_(True),)),
                                           ("laplace", ("\u0663", 1.0))])
def test_theta_that_is_not_a_real_number_is_refused(family, theta):
    from dpbook.families import get_family

    with pytest.raises(ValueError, match="must be"):
        get_family(family).check_theta(*theta)


def _seeded_calls():
    from dpbook.fisher import best_interval
    from dpbook.marginal import marginal_posterior
    from dpbook.mhaar import mhaar
    from dpbook.privacy.population import family_population, normal_population
    from dpbook.smc import SMC, smc_posterior

    return {
        "smc_posterior": lambda s: smc_posterior(Y, L, R, 1.0, n_particles=20, seed=s),
        "smc_posterior generic": lambda s: smc_posterior(Y, L, R, 1.0, n_particles=20,
                                                         seed=s, generic=True),
        "SMC laplace family": lambda s: SMC(1.0, "laplace", n_particles=20, seed=s),
        "mhaar": lambda s: mhaar(Y, L, R, 1.0, n_iter=50, seed=s),
        "mhaar generic": lambda s: mhaar(Y, L, R, 1.0, n_iter=50, seed=s, generic=True),
        "marginal_posterior": lambda s: marginal_posterior(Y, L, R, 1.0, n_particles=20,
                                                           seed=s),
        "best_interval mc": lambda s: best_interval(1.0, method="mc", grid=3, M=5, K=5,
                                                    seed=s),
        "normal_population": lambda s: normal_population(5, 0.0, 1.0, 1.0, seed=s),
        "family_population": lambda s: family_population("laplace", (0.0, 1.0), 5, 1.0,
                                                         seed=s),
    }


bad_seeds = st.one_of(st.floats(allow_nan=True).filter(lambda v: v != int(v) if
                                                        np.isfinite(v) else True),
                      st.integers(max_value=-1), st.booleans(), st.text(max_size=3),
                      st.complex_numbers(max_magnitude=5), st.just([1.5]))


@pytest.mark.parametrize("entry", list(_seeded_calls()))
@SETTINGS
@given(bad=bad_seeds)
def test_a_bad_seed_is_a_value_error_naming_seed(entry, bad):
    """seed=1.5 raised numpy's TypeError, seed=-1 a message without the argument's
    name, seed=True ran as seed 1."""
    with pytest.raises(ValueError, match="^seed must be"):
        _seeded_calls()[entry](bad)


def test_a_family_without_a_primitive_names_the_class_and_the_method():
    """A Family subclass without sample_prior raised NotImplementedError with an empty
    message."""
    from dpbook.families import Family, LocationScaleFamily
    from dpbook.model.mechanisms import Mechanism
    from dpbook.privacy.policies import Policy
    from dpbook.smc import smc_posterior

    class Bare(Family):
        name = "bare"
        params = ("a",)
        positive = (False,)

        def logpdf(self, x, a):
            return -0.5 * (x - a) ** 2

    with pytest.raises(NotImplementedError,
                       match=r"^Bare does not define sample_prior\(\).*subclass of Family"):
        smc_posterior(Y, L, R, 1.0, family=Bare(), n_particles=10)

    class Shapeless(LocationScaleFamily):
        name = "shapeless"

    with pytest.raises(NotImplementedError, match=r"^Shapeless does not define base_cdf\(\)"):
        Shapeless().cdf(0.5, 0.0, 1.0)
    with pytest.raises(NotImplementedError, match=r"^Mute does not define cdf\(\)"):
        type("Mute", (Mechanism,), {})().cdf(0.0, 1.0)
    with pytest.raises(NotImplementedError, match=r"^Idle does not define next_interval"):
        type("Idle", (Policy,), {})().next_interval(None, None)


def _cli_error(capsys, *args) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpbook: error: ") and err.count("\n") == 1, err
    return err
