"""The MHAAR engine (dpbook.mhaar.compiled_chain; Alparslan & Yildirim 2022, Algorithm 8): a
family written as a user writes one runs compiled (its chains against the exact grid
posterior, eq. 5: tests/test_mhaar_family.py), one that does not runs the same chain on
numpy, and the paper's model keeps its own kernel."""


import numpy as np
import pytest
from test_engine import Logistic, ScipyLogistic

from dpbook.backends import backend
from dpbook.mhaar import compiled_chain as me
from dpbook.mhaar import mhaar
from dpbook.model import compiler as model_compiled
from dpbook.model.families import get_family
from dpbook.model.mechanisms import release

N, EPS = 40, 5.0


def _data(fam, mechanism, n=N, seed=5):
    """x ~ P_theta at (50, sqrt 10) released through [theta_0.1%, theta_99.9%] at eps 5."""
    rng = np.random.default_rng(seed)
    theta = (50.0, 10 ** 0.5)
    lo, hi = (float(v) for v in fam.ppf(np.array([1e-3, 1 - 1e-3]), *theta))
    x = fam.sample(rng, *theta, size=n)
    l, r = np.full(n, lo), np.full(n, hi)
    return release(x, l, r, EPS, rng, mechanism=mechanism), l, r


# against the exact posterior: test_mhaar_family.test_matches_exact_posterior (a user's
# compiled family and the Laplace family with Gaussian noise among its cases)


@pytest.mark.slow
def test_uncompilable_family_runs_the_same_chain_with_one_warning():
    """A family whose base_ppf calls scipy runs the Python path, after one warning
    naming the primitive; its chain is the compiled one's up to rounding (same keyed
    streams, same order)."""
    y, l, r = _data(Logistic(), "laplace", n=25)
    model_compiled._WARNED.clear()
    a = mhaar(y, l, r, EPS, family=Logistic(), n_iter=300, seed=3)
    with pytest.warns(UserWarning, match="base_ppf") as w:
        b = mhaar(y, l, r, EPS, family=ScipyLogistic(), n_iter=300, seed=3)
        mhaar(y, l, r, EPS, family=ScipyLogistic(), n_iter=10, seed=3)
    assert len([x for x in w if "base_ppf" in str(x.message)]) == 1
    np.testing.assert_array_equal(a.accepted, b.accepted)
    np.testing.assert_allclose(a.samples, b.samples, rtol=1e-9)
    assert a.step_coords == ("loc", "log_scale")


@pytest.mark.slow
def test_dispatch_and_paper_kernel_untouched():
    """The paper's model keeps its kernel; every other model goes to the engine, and
    generic=True sends the normal family there too (its own streams)."""
    assert backend("mhaar", "normal", "laplace").__name__ == "mhaar_normal_laplace"
    assert backend("mhaar", Logistic(), "laplace").func is me.mhaar_engine
    y, l, r = _data(get_family("normal"), "laplace", n=30)
    a = mhaar(y, l, r, EPS, n_iter=200, seed=1)
    b = mhaar(y, l, r, EPS, n_iter=200, seed=1, generic=True)
    assert a.step_coords == ("mu", "var") and b.step_coords == ("mu", "log_sigma")
    assert not np.array_equal(a.samples, b.samples)
    c = mhaar(y, l, r, EPS, n_iter=200, seed=1, generic=True)
    np.testing.assert_array_equal(b.samples, c.samples)


@pytest.mark.parametrize("kw, msg", [(dict(parallel=True), "no option 'parallel'"),
                                     (dict(steps=[1.0, 0.0]), "steps"),
                                     (dict(n_aux=1), "n_aux")])
def test_engine_bad_input(kw, msg):
    with pytest.raises(ValueError, match=msg) as e:
        mhaar([1.0, 2.0], 0.0, 3.0, 1.0, family=Logistic(), n_iter=5, **kw)
    assert "\n" not in str(e.value)
