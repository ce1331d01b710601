"""The online gradient's score (Section 7; Fisher's identity, Appendix C) compiled for
any location-scale family (dpbook.likelihood.compiled_quadrature.make_score), the backend that
chooses it, and a block of releases absorbed in one compiled call
(OnlineGradient.update_many)."""

import pickle
import warnings

import numpy as np
import pytest
from test_engine import Logistic

from dpbook.backends import backend
from dpbook.likelihood import normal_laplace, quadrature
from dpbook.likelihood.compiled import CompiledScore
from dpbook.model.families import get_family
from dpbook.online import OnlineGradient
from dpbook.privacy.curator import absorb

FAMILIES = [get_family("laplace"), Logistic(), get_family("student_t", df=3.0)]
EPS = (0.3, 50.0, 2.0, 10.0)


def _cases(mech, n=40, seed=0):
    """Releases as the online gradient asks for them, and beyond: intervals
    [m0 - A c, m0 + A c] (A from 0.1 to 3, eps from 0.3 to 50: c/b = eps/(2A) from 0.05
    to 250), the estimate m within 2 c of their centre, and y inside or beyond an end
    by up to 40 b (Laplace noise) or 9 b (Gaussian: its 1e-17 tail)."""
    rng = np.random.default_rng(seed)
    m0, c = rng.normal(0.0, 3.0, n), np.exp(rng.uniform(-3.0, 2.0, n))
    A = np.exp(rng.uniform(np.log(0.1), np.log(3.0), n))
    A[:2] = 3.0, 0.1  # with the eps below, the smallest and largest c/b
    eps = np.resize(EPS, n)
    l, r = m0 - A * c, m0 + A * c
    b = (r - l) / eps
    reach = 40.0 if mech == "laplace" else 9.0
    y = rng.uniform(l - reach * b, r + reach * b)
    m = m0 + c * rng.uniform(-2.0, 2.0, n)
    return y, l, r, eps, m, c


@pytest.mark.slow
@pytest.mark.parametrize("mech", ["laplace", "gaussian"])
@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.name)
def test_compiled_score_is_the_quadrature_score(fam, mech):
    """Within 1e-8 of the numpy quadrature's score relative to 1 + |s| (measured: <=
    1.5e-10 on 300 cases a model; beyond this geometry, the estimate many scales from
    the interval and y many b from its mass, the engine's rule has no peak search and
    its log-likelihood and score lose digits)."""
    y, l, r, eps, m, c = _cases(mech)
    b = (r - l) / eps
    out = np.abs(y - np.clip(y, l, r)) / b
    assert out.max() > (20.0 if mech == "laplace" else 5.0)  # y far beyond an end
    assert (c / b).min() < 0.1 and (c / b).max() > 100.0
    sc = backend("score", fam, mech)
    got = np.array([sc(*args) for args in zip(y, l, r, eps, m, c)])
    assert all(sc.kernel(*args, sc.ctx)[0] for args in zip(y, l, r, b, m, c))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # Logistic's exp overflows
        want = np.empty_like(got)
        for e in EPS:  # (the quadrature takes one eps a call)
            k = eps == e
            want[k] = quadrature.score(y[k], l[k], r[k], e, (m[k], c[k]), fam, mech)
    np.testing.assert_array_less(np.abs(got - want) / (1.0 + np.abs(want)), 1e-8)


class ScipyCdfLogistic(Logistic):
    """A family whose cdf numba cannot compile (scipy.stats inside)."""

    name = "scipy_cdf_logistic"

    def base_cdf(self, z):
        from scipy import stats

        return stats.logistic.cdf(z)


@pytest.mark.slow
def test_the_backend_chooses_closed_form_engine_or_numpy():
    assert backend("score", "normal", "laplace") is normal_laplace.compiled_score
    for fam, mech in (("normal", "gaussian"), ("laplace", "laplace")):
        sc = backend("score", fam, mech)
        assert isinstance(sc, CompiledScore) and sc is not normal_laplace.compiled_score
    assert backend("score", "poisson", "laplace") is None
    fam = ScipyCdfLogistic()
    with pytest.warns(UserWarning, match="base_cdf"):
        assert backend("score", fam, "laplace") is None
    # the online gradient then runs the numpy quadrature
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = OnlineGradient(2.0, -1.0, 1.0, family=fam)
    s = g.score(0.4, -1.0, 1.0, (0.2, 1.3))
    assert np.array_equal(s, quadrature.score(0.4, -1.0, 1.0, 2.0, (0.2, 1.3), fam))


def _stream(eps, n=120, seed=3):
    """Releases around N(1, 2^2) through one interval per block of 40, and two far
    beyond it (the closed form's log-space fallback: |m - y| > 200 b)."""
    rng = np.random.default_rng(seed)
    l = np.repeat(rng.uniform(-2.0, 0.0, n // 40), 40)
    r = l + 3.0
    y = np.clip(rng.normal(1.0, 2.0, n), l, r) + rng.laplace(0.0, 1.0, n) * (r - l) / eps
    y[[5, 70]] = r[[5, 70]] + 250.0 * (r[[5, 70]] - l[[5, 70]]) / eps
    return y, l, r


@pytest.mark.slow
@pytest.mark.parametrize("family", ["normal", "laplace"])
def test_update_many_is_update_in_turn(family):
    """The estimates and history bit for bit: the closed form (with its fallback) and
    the engine's score; blocks of any size, through a save and load."""
    eps = 2.0
    y, l, r = _stream(eps)
    one = OnlineGradient(eps, family=family)
    for t in range(len(y)):
        one.update(y[t], l[t], r[t])
    many = OnlineGradient(eps, family=family)
    for a, z in ((0, 1), (1, 40), (40, 41), (41, 90)):
        many.update_many(y[a:z], l[a:z], r[a:z])
    many = pickle.loads(pickle.dumps(many))
    absorb(many, y[90:], l[90:], r[90:])
    assert one.t == many.t == len(y) and np.array_equal(one.u, many.u)
    for name in ("mean_" + p for p in one.params):
        assert getattr(one.history, name) == getattr(many.history, name)
    assert len(many.history.ess) == len(y)
    assert not np.allclose(one.u, one.u0)  # it moved


def test_absorb_takes_a_block_in_one_call():
    g = OnlineGradient(2.0)
    calls = []
    g.update = lambda *a: calls.append(a)
    absorb(g, np.array([0.1, 0.5]), np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    assert calls == [] and g.t == 2


def test_update_many_refuses_bad_input():
    g = OnlineGradient(2.0)
    with pytest.raises(ValueError, match="y"):
        g.update_many([0.1, np.nan], [-1.0, -1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        g.update_many([0.1], [1.0], [-1.0])
    assert g.t == 0
