"""The one grid-posterior pipeline (dpbook.posterior.exact) with the compiled likelihood
grid (dpbook.likelihood.compiled_quadrature) against the numpy quadrature kept as the oracle
(tests/posterior_oracle.py, the generic pipeline it replaced)."""

import warnings

import numpy as np
import pytest
from posterior_oracle import exact_posterior_quadrature, logistic_release_quad
from scipy import special
from test_engine import Logistic

from dpbook import backends
from dpbook.likelihood import quadrature as quad
from dpbook.model.families import get_family
from dpbook.model.mechanisms import release
from dpbook.posterior import exact_posterior
from dpbook.posterior.exact import PaperModel, engine_model


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


@pytest.mark.slow
@pytest.mark.parametrize("fam, mech", [MODELS[0], MODELS[2],
                                       (get_family("student_t", df=3.0), "laplace")],
                         ids=lambda v: getattr(v, "name", v))
def test_posterior_agrees_with_the_oracle(fam, mech):
    """Same posterior as the numpy pipeline it replaced (its own box, axes and rule):
    quantiles from 5% to 95% within 1e-3 of the interquartile range (measured <= 1e-4).
    The pipeline is one code for every model; the models enter through the compiled
    log-likelihood, checked for all four of MODELS against the numpy quadrature in
    test_compiled_loglik_is_the_quadrature_density (the logistic with Gaussian noise,
    18 s of numpy oracle here, is among them).
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


class SfLogistic(Logistic):
    """The logistic with its closed-form sf: the reference for the default base_sf."""

    name = "sf_logistic"

    def base_sf(self, z):
        return special.expit(-z)


def test_the_default_sf_keeps_the_upper_atom():
    """A family without base_sf: S(z_r) g_b(y - r) of eq. (7) does not vanish where
    1 - cdf rounds to 0 (the logistic past z ~ 37; there 1 - cdf gave the score 107
    against 67.9).  The default base_sf against the closed form over the whole upper
    tail (where 1 - cdf is not used: measured <= 8e-13); log-likelihood and score of
    the compiled engine and of the numpy quadrature against the same with the
    closed-form sf, releases whose interval lies far in the upper tail and y far above
    it (the atom dominates) and ordinary ones."""
    from dpbook.likelihood.compiled_quadrature import _default_sf, _primitives
    from dpbook.model.compiler import family_state

    fam, ref = Logistic(), SfLogistic()
    z = np.concatenate([np.linspace(-40.0, 60.0, 201), [100.0, 300.0, 700.0]])
    want = special.expit(-z)
    tol = np.maximum(2e-12, 2.3e-16 / want)  # 1 - cdf: an ulp of 1 in S, S >= 1e-6
    assert np.all(np.abs(fam.base_sf(z) / want - 1.0) <= tol)
    sf = _primitives(fam)[2]
    assert sf is _default_sf(*_primitives(fam)[:2])
    state = family_state(fam)[0]
    assert np.all(np.abs(np.array([sf(state, v) for v in z]) / want - 1.0) <= tol)
    #        y,    l,    r,   eps,  m,   c
    cases = [(42.0, 30.0, 40.0, 50.0, 0.0, 1.0), (41.0, 38.0, 40.0, 100.0, 0.0, 1.0),
             (60.0, 50.0, 55.0, 20.0, 1.0, 1.2), (0.3, -1.0, 2.0, 2.0, 0.0, 1.0),
             (9.0, 5.0, 8.0, 30.0, -2.0, 0.4)]
    y, l, r, eps, m, c = (np.array(v) for v in zip(*cases))
    assert np.sum(fam.base_cdf((r - m) / c) == 1.0) >= 2  # 1 - cdf would be 0
    for mech in ("laplace", "gaussian"):
        # the compiled engine (the logistic's own kernels, no second compile) and the
        # numpy quadrature of the logistic without sf, against the numpy quadrature
        # with the closed form: to 1e-8, the two rules' agreement elsewhere
        terms, score = (backends.backend(what, fam, mech) for what in ("loglik_terms", "score"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the logistic's exp overflows
            for k in range(len(cases)):
                args = (y[k], l[k], r[k], eps[k], (m[k], c[k]))
                want = quad.log_density(*args, ref, mech)
                assert abs(quad.log_density(*args, fam, mech) - want) < 1e-10 * abs(want)
                got = terms(y[k:k + 1], l[k:k + 1], r[k:k + 1], eps[k],
                            np.array([[m[k], c[k]]]))[0, 0]
                assert abs(got - want) < 1e-8 * (1.0 + abs(want))
                want = quad.score(*args, ref, mech)
                for got in (quad.score(*args, fam, mech), score(*args[:4], m[k], c[k])):
                    assert np.all(np.abs(got - want) < 1e-8 * (1.0 + np.abs(want)))
        # m 40 c below l (all the mass clipped to l): the score is ~1e-17, and before the
        # default sf the numpy one dropped the upper atom's gradient, S(z_r) rounding to 0
        # (3.2e-19 against 1.9e-18): relative agreement, both paths
        for y1, eps1, c1 in ((0.5, 2.0, 1.0), (1.5, 2.0, 1.0), (3.0, 5.0, 0.1)):
            args = (y1, 0.0, 1.0, eps1, (-40.0 * c1, c1))
            want = quad.score(*args, ref, mech)
            for got in (quad.score(*args, fam, mech), score(*args[:4], *args[4])):
                np.testing.assert_allclose(got, want, rtol=1e-10)


def test_the_engine_resolves_a_narrow_peak_between_panel_ends():
    """The log integrand of eq. (7) can peak between the base's quantiles and the
    noise's reach around z_u (Gaussian noise, c/b = 0.05, y beyond the population's
    bulk by many c), where no panel ended: the engine's log-likelihood was off by up to
    0.32 nats, its score by 3e-3.  With the peak search (and the boundary layer of
    Gaussian noise with y beyond an end by d >> b, 1.2e-4 nats before): against
    scipy's quad, over 1680 cases (l, r = -1, 1; eps 0.5-50, c 0.002-20, m -30-30, y
    inside or beyond an end by up to 30 b) <= 3.5e-11 in log p, <= 1.1e-6 in the score
    relative to 1 + |s| (eps = 50 and c = 20, c/b = 500: the cancellation of
    make_score); here the worst cases."""
    fam = Logistic()
    cases = [(-5.0, 0.7, "gaussian"), (5.0, 0.0, "gaussian"), (0.0, 0.0, "gaussian"),
             (2.0, 0.7, "gaussian")]
    for k, m, mech in cases:
        l, r, eps, c = -1.0, 1.0, 50.0, 0.002
        b = (r - l) / eps
        y = r + k * b if k >= 0 else l + k * b
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the logistic's exp overflows
            want, want_s = logistic_release_quad(fam, y, l, r, eps, m, c, mech)
        got = backends.backend("loglik_terms", fam, mech)(
            np.array([y]), np.array([l]), np.array([r]), eps, np.array([[m, c]]))[0, 0]
        assert abs(got - want) < 1e-9
        got_s = np.asarray(backends.backend("score", fam, mech)(y, l, r, eps, m, c))
        assert np.all(np.abs(got_s - want_s) < 1e-7 * (1.0 + np.abs(want_s)))


@pytest.mark.slow
@pytest.mark.parametrize("mech", ["laplace", "gaussian"])
def test_the_engine_follows_a_power_law_tail(mech):
    """Student-t (df 3) tails fall as a power: between its 1e-9 and 1e-4 quantiles |z|
    grows fifty-fold, where one 8-node panel lost 8.8e-5 of p (b = 2e5, c = 1) and a
    panel over z in [4.5, 17.3] lost 1.8e-8 (Section 6's intervals at (43.7, 1.23)).
    Tail panels are cut at geometric points; log p within 1e-9 of scipy's quad."""
    import math

    from scipy import integrate, stats

    fam = get_family("student_t", df=3.0)
    cases = [(y, -1e3, 1e3, 0.01, 0.0, 1.0) for y in (0.0, -8.0e5, 1.6e6)] + \
            [(y, 35.0, 65.0, 2.0, 43.7, 1.23) for y in (49.08, 22.7, 79.6)]
    got = [backends.backend("loglik_terms", fam, mech)(
        np.array([y]), np.array([l]), np.array([r]), eps, np.array([[m, c]]))[0, 0]
        for y, l, r, eps, m, c in cases]
    for (y, l, r, eps, m, c), g in zip(cases, got):
        b = (r - l) / eps
        T = stats.t(3.0, loc=m, scale=c)
        noise = stats.laplace(scale=b) if mech == "laplace" else stats.norm(scale=b)
        ends = sorted({l, r, *(min(max(v, l), r) for v in (y, m, m - 10 * c, m + 10 * c,
                                                            m - 100 * c, m + 100 * c))})
        p = sum(integrate.quad(lambda x, T=T, nz=noise, y=y: T.pdf(x) * nz.pdf(y - x), a, e,
                               epsabs=0, epsrel=1e-13, limit=400)[0]
                for a, e in zip(ends, ends[1:]))
        p += T.cdf(l) * noise.pdf(y - l) + T.sf(r) * noise.pdf(y - r)
        assert abs(g - math.log(p)) < 1e-9, (y, l, r, eps, m, c, g - math.log(p))
