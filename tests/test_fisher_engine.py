"""One engine for eq. (8) with Algorithm 4 (dpbook.fisher.mc), compiled for any
location-scale family: a user's family runs compiled, agrees with the numpy oracle
(tests/fisher_oracle.py) within Monte Carlo standard errors, and one that cannot compile
runs on numpy with one warning."""

import warnings

import numpy as np
import pytest
from fisher_oracle import fisher_mc_oracle
from test_engine import Logistic, ScipyLogistic

from dpbook.fisher import fisher_grid, fisher_mc
from dpbook.fisher import mc_primitives as engine
from dpbook.model.families import get_family

# (family, mechanism, theta, (l, r, eps))
MODELS = [
    (Logistic(), "laplace", (0.0, 1.0), (-1.5, 2.0, 2.0)),
    (Logistic(), "gaussian", (1.0, 2.0), (-2.0, 5.0, 5.0)),
    ("laplace", "gaussian", (0.0, 1.0), (-1.0, 1.5, 2.0)),
    ("normal", "gaussian", (0.0, 1.0), (-1.0, 1.0, 2.0)),
    ("student_t", "laplace", (0.0, 1.0), (-2.0, 1.0, 2.0)),
    ("poisson", "laplace", (10.0,), (7.0, 13.0, 2.0)),
]
SEEDS = range(4)


@pytest.mark.slow
@pytest.mark.parametrize("fam, mech, theta, case", MODELS,
                         ids=lambda p: getattr(p, "name", str(p)))
def test_engine_agrees_with_numpy_oracle(fam, mech, theta, case):
    """Means over 4 seeds (M = 300, K = 3000): engine vs oracle within 4 standard
    errors of their difference, each entry (against eq. (7):
    test_fisher.test_mc_agrees_with_exact).  False failures: P(|z| > 4) = 6.3e-5 per
    entry, ~1e-3 over the 6 models; detects an engine-oracle difference of ~4-6 se."""
    l, r, eps = case
    est = [fisher_mc(l, r, eps, theta, fam, mech, M=300, K=3000, rng=s) for s in SEEDS]
    ora = [fisher_mc_oracle(l, r, eps, theta, fam, mech, 300, 3000, 100 + s) for s in SEEDS]
    n = len(SEEDS)
    Fe = np.mean([e.F for e in est], 0)
    see = np.sqrt(np.sum([e.se**2 for e in est], 0)) / n
    Fo = np.mean([o[0] for o in ora], 0)
    seo = np.sqrt(np.sum([o[1] ** 2 for o in ora], 0)) / n
    z = np.abs(Fe - Fo) / np.hypot(see, seo)
    assert np.all(z < 4.0), z


@pytest.mark.slow
def test_user_family_compiles_and_matches_its_numpy_primitives(monkeypatch):
    """The logistic's base_ppf and base_dlogpdf compile; on the same keyed uniforms the
    numpy primitives give the same estimates to rounding (shared and fresh)."""
    fam = Logistic()
    assert engine.engine_class(fam, "laplace") is engine.CompiledEngine
    assert engine.engine_class(fam, "gaussian") is engine.CompiledEngine
    # the shipped Student-t compiles too (dpbook.model.tdist), Poisson is not location-scale
    assert engine.engine_class(get_family("student_t"), "laplace") is engine.CompiledEngine
    assert engine.engine_class(get_family("poisson"), "laplace") is engine.FisherEngine
    kw = dict(M=200, K=1500, rng=3)
    compiled = [fisher_mc(-1.0, 2.0, 3.0, (0.5, 1.5), fam, share_samples=s, **kw)
                for s in (True, False)]
    monkeypatch.setattr(engine, "engine_class", lambda f, m: engine.FisherEngine)
    for share, a in zip((True, False), compiled):
        b = fisher_mc(-1.0, 2.0, 3.0, (0.5, 1.5), fam, share_samples=share, **kw)
        np.testing.assert_allclose(a.F, b.F, rtol=1e-9)
        np.testing.assert_allclose(a.se, b.se, rtol=1e-7)


def test_uncompilable_family_runs_on_numpy_with_one_warning():
    fam = ScipyLogistic()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        a = fisher_mc(-1.0, 2.0, 3.0, None, fam, M=100, K=800, rng=1)
        fisher_grid(3.0, fam, method="mc", grid=3, M=50, K=200, seed=1)
    msgs = [str(w.message) for w in got if "Fisher information" in str(w.message)]
    assert len(msgs) == 1 and "base_ppf" in msgs[0] and "\n" not in msgs[0], msgs
    b = fisher_mc(-1.0, 2.0, 3.0, None, Logistic(), M=100, K=800, rng=1)
    np.testing.assert_allclose(a.F, b.F, rtol=1e-9)  # the same uniforms, numpy ppf


@pytest.mark.parametrize("call, match", [
    (lambda: fisher_mc(-1, 1, 1, path="fast"), "unknown path"),
    (lambda: fisher_mc(-1, 1, 1, mechanism="gaussian", path="sorted"), "path 'sorted'"),
    (lambda: fisher_mc(-1, 1, 1, (0.0, -1.0), Logistic()), "scale"),
])
def test_bad_input_is_one_line(call, match):
    with pytest.raises(ValueError, match=match) as e:
        call()
    assert "\n" not in str(e.value)
