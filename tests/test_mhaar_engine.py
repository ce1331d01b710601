"""The MHAAR engine (dpbook.mhaar.compiled_chain; Alparslan & Yildirim 2022, Algorithm 8): a
family written as a user writes one runs compiled, and its chains agree with the exact
grid posterior (eq. 5) and with the old numpy sampler (tests/mhaar_oracle.py), in Monte
Carlo standard errors over several seeds."""


import numpy as np
import pytest
from mhaar_oracle import mhaar_numpy
from test_engine import Logistic, ScipyLogistic

from dpbook.backends import backend
from dpbook.mhaar import batch_means_se, mhaar
from dpbook.mhaar import compiled_chain as me
from dpbook.model import compiler as model_compiled
from dpbook.model.families import get_family
from dpbook.model.mechanisms import release

N, EPS, ITERS, BURN, BATCHES = 40, 5.0, 20_000, 0.2, 40
SEEDS = (1, 2, 3, 4)
MODELS = {"logistic": (Logistic(), "laplace"), "laplace-gaussian": (get_family("laplace"),
                                                                    "gaussian"),
          "normal-gaussian": (get_family("normal"), "gaussian"),
          "student_t-3": (get_family("student_t", df=3), "laplace")}


def _data(fam, mechanism, n=N, seed=5):
    """x ~ P_theta at (50, sqrt 10) released through [theta_0.1%, theta_99.9%] at eps 5."""
    rng = np.random.default_rng(seed)
    theta = (50.0, 10 ** 0.5)
    lo, hi = (float(v) for v in fam.ppf(np.array([1e-3, 1 - 1e-3]), *theta))
    x = fam.sample(rng, *theta, size=n)
    l, r = np.full(n, lo), np.full(n, hi)
    return release(x, l, r, EPS, rng, mechanism=mechanism), l, r


def _se(kept):
    return np.array([batch_means_se(kept[:, j], BATCHES) for j in range(kept.shape[1])])


@pytest.mark.slow
@pytest.mark.parametrize("model", ["logistic", "laplace-gaussian"])
def test_engine_agrees_with_numpy_oracle(model):
    """The engine and the old numpy sampler (same algorithm, other random numbers)
    agree within 4 combined standard errors of the means over 4 seeds each.

    False failures: P(|z| > 4) = 6e-5 per comparison (the batch-means se of 4 x 40
    batches is well estimated), 2 per model: about 1e-4 per model.  Smallest difference
    detected: 4 combined se half the time, 7 se almost always."""
    fam, mechanism = MODELS[model]
    y, l, r = _data(fam, mechanism, seed=9)
    eng = [mhaar(y, l, r, EPS, family=fam, mechanism=mechanism, n_iter=ITERS, seed=s,
                 burn_fraction=BURN) for s in SEEDS]
    ora = [mhaar_numpy(y, l, r, EPS, family=fam, mechanism=mechanism, n_iter=ITERS // 2,
                       seed=s, burn_fraction=BURN) for s in SEEDS]
    for a, b in ((eng, ora),):
        ma = np.mean([x.mean() for x in a], axis=0)
        mb = np.mean([x.mean() for x in b], axis=0)
        sa = np.sqrt(sum(_se(x.kept()) ** 2 for x in a)) / len(a)
        sb = np.sqrt(sum(_se(x.kept()) ** 2 for x in b)) / len(b)
        assert np.all(np.abs(ma - mb) < 4 * np.hypot(sa, sb)), (model, ma, mb, sa, sb)


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
