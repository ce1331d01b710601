"""The one grid-posterior pipeline (dpbook.posterior.exact) with the compiled likelihood
grid (dpbook.posterior.engine) against the numpy quadrature kept as the oracle
(tests/posterior_oracle.py, the generic pipeline it replaced)."""

import warnings

import numpy as np
import pytest
from posterior_oracle import exact_posterior_quadrature
from test_engine import Logistic

from dpbook import backends
from dpbook.likelihood import quadrature as quad
from dpbook.model.families import get_family
from dpbook.model.mechanisms import release
from dpbook.posterior import exact_posterior
from dpbook.posterior.engine import engine_model
from dpbook.posterior.exact import PaperModel


def _releases(n=40, eps=2.0, mech="laplace", seed=1):
    rng = np.random.default_rng(seed)
    x = 50.0 + 10**0.5 * rng.standard_normal(n)
    l, r = np.full(n, 35.0), np.full(n, 65.0)
    l[::3], r[::3] = 40.0, 58.0  # intervals that change over time
    return release(x, l, r, eps, rng, mech), l, r


MODELS = [(Logistic(), "laplace"), (Logistic(), "gaussian"),
          (get_family("laplace"), "gaussian"), (get_family("normal"), "gaussian")]


@pytest.mark.parametrize("fam, mech", MODELS, ids=lambda v: getattr(v, "name", v))
def test_compiled_loglik_is_the_quadrature_density(fam, mech):
    """sum_t log p(y_t | m, c) on a grid reaching far tails (c from 0.02 to 300, m far
    from the data) equals the sum of the numpy quadrature's log_density to 1e-8."""
    y, l, r = _releases(mech=mech)
    model = engine_model(fam, mech)(y, l, r, 2.0)
    mus, sigs = np.array([-200.0, 30.0, 49.0, 51.5, 70.0]), np.array([0.02, 0.7, 2.0, 300.0])
    got = model.loglik([mus, sigs])
    want = np.array([[np.sum(quad.log_density(y, l, r, 2.0, (m, c), fam, mech)) for c in sigs]
                     for m in mus])
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("fam, mech", [*MODELS[:3], (get_family("student_t", df=3.0), "laplace")],
                         ids=lambda v: getattr(v, "name", v))
def test_posterior_agrees_with_the_oracle(fam, mech):
    """Same posterior as the numpy pipeline it replaced (its own box, axes and rule):
    quantiles from 5% to 95% within 1e-3 of the interquartile range (measured <= 1e-4).
    Moments are not compared: with clipping the posterior of the scale has the prior's
    tail (infinite variance), so its sd is that of the box.  Student-t's cdf and sf
    compile (dpbook.model.tdist): no warning, the compiled grid."""
    y, l, r = _releases(n=80, eps=5.0, mech=mech)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        post = exact_posterior(y, l, r, 5.0, family=fam, mechanism=mech)
    ref = exact_posterior_quadrature(y, l, r, 5.0, fam, mech)
    q = [0.05, 0.25, 0.5, 0.75, 0.95]
    iqr = ref.quantile(0.75) - ref.quantile(0.25)
    assert post.edge < -30.0
    assert np.all(np.abs(post.quantile(q) - ref.quantile(q)) < 1e-3 * iqr)


def test_the_paper_model_keeps_its_closed_form_and_others_compile():
    assert backends.backend("posterior_model", "normal") is PaperModel
    assert backends.backend("posterior_model", Logistic(), "gaussian") is not None
    assert backends.engine("posterior_model", "normal") is not None  # generic=True


def test_a_family_that_does_not_compile_warns_once_naming_the_primitive():
    class ScipyCdf(Logistic):
        name = "scipy_cdf_logistic"

        def base_cdf(self, z):
            from scipy import stats

            return stats.logistic.cdf(z)

    y, l, r = _releases(n=12)
    box = dict(grid=(21, 21), bounds=((40.0, 60.0), (0.3, 10.0)))
    with pytest.warns(UserWarning, match="base_cdf") as rec:
        a = exact_posterior(y, l, r, 2.0, family=ScipyCdf(), **box)
    assert len([w for w in rec if "numpy quadrature" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        exact_posterior(y, l, r, 2.0, family=ScipyCdf(), **box)
    b = exact_posterior(y, l, r, 2.0, family=Logistic(), **box)  # compiled
    np.testing.assert_allclose(a.log_post, b.log_post, rtol=1e-9, atol=1e-8)


@pytest.mark.parametrize("kw, match", [
    (dict(grid=(11,)), "pair"), (dict(grid=(11, 2)), "grid n_scale"),
    (dict(bounds=[(0, 1)]), "bounds"), (dict(bounds=[(0, 1), (0, 1)]), "> 0"),
    (dict(bounds=[(1, 0), (1, 2)]), "lo < hi"),
])
def test_bad_input_is_one_line(kw, match):
    with pytest.raises(ValueError, match=match) as err:
        exact_posterior([1.0], 0.0, 2.0, 1.0, family=Logistic(), **kw)
    assert "\n" not in str(err.value)
