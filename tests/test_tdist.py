"""The Student-t primitives written for numba (dpbook.model.tdist) against scipy and,
where scipy is off, closed forms.

Tolerances: 1e-12 relative, about a hundred times the rounding of a continued fraction
of 20-50 terms.  scipy is not right everywhere, so it is used where it is: its
``stdtr`` is off by 3e-9 near 0 at df = 1 (checked here against the Cauchy's closed
form instead), its ``stdtrit`` returns inf or 2e153 in the far tails for small df
(checked there by the round trip through scipy's ``stdtr``), and ``stats.t.logcdf``
is -inf where the cdf underflows (checked against the tail's power law).
"""

import math

import numpy as np
import pytest
from numba import njit
from scipy import special, stats

from dpbook.model.families import get_family
from dpbook.model.tdist import log_stdtr, stdtr, stdtrit

DFS = (0.5, 1.0, 2.0, 2.5, 3.0, 5.0, 30.0, 1e3)
RTOL = 1e-12
X = np.concatenate([-np.logspace(-8, 30, 381), [0.0], np.logspace(-8, 30, 381),
                    np.linspace(-12.0, 12.0, 2401)])
_E = np.logspace(-300, math.log10(0.5), 601)
U = np.concatenate([_E, 1.0 - _E[_E >= 1e-16], np.linspace(1e-3, 1 - 1e-3, 999)])


def _closed_cdf(df, x):
    """The t cdf where it has a closed form (df 1, 2), each tail without cancellation."""
    a = np.abs(x)
    if df == 1.0:
        low = np.arctan2(1.0, a) / np.pi
    else:
        s = np.sqrt(2.0 + a * a)
        low = 1.0 / (s * (s + a))
    return np.where(x < 0, low, 1.0 - low)


def _reference_cdf(df, x):
    return _closed_cdf(df, x) if df in (1.0, 2.0) else special.stdtr(df, x)


@pytest.mark.parametrize("df", DFS)
def test_cdf_against_scipy(df):
    np.testing.assert_allclose(stdtr(df, X), _reference_cdf(df, X), rtol=RTOL, atol=1e-300)
    assert stdtr(df, -np.inf) == 0.0 and stdtr(df, np.inf) == 1.0
    assert np.isnan(stdtr(df, np.nan))


def test_scipy_stdtr_is_off_where_the_closed_form_is_used():
    """Why df = 1 is checked against the closed form: scipy's error there is 3e-9."""
    x = np.array([-1e-8])
    assert abs(special.stdtr(1.0, x) - _closed_cdf(1.0, x))[0] > 1e-9
    assert abs(stdtr(1.0, x) - _closed_cdf(1.0, x))[0] < 1e-16


@pytest.mark.parametrize("df", DFS)
def test_logcdf_against_scipy_and_the_tail(df):
    got = log_stdtr(df, X)
    with np.errstate(divide="ignore"):
        want = np.log(_closed_cdf(df, X)) if df in (1.0, 2.0) else stats.t.logcdf(X, df)
    # above 0, log(1 - F(-x)) by log1p: stats.t.logcdf takes the log of a value near 1
    # and is off by up to 1e-11 there
    want = np.where(X > 0, np.log1p(-_reference_cdf(df, -X)), want)
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=RTOL, atol=1e-300)
    # far in the lower tail: log F(t) = (nu/2 - 1) log nu - nu log|t| - log B(nu/2, 1/2)
    # + O(1/t^2), finite where F underflows
    t = -np.array([1e25, 1e28, 1e30])
    tail = ((df / 2 - 1) * math.log(df) - df * np.log(-t)
            - special.betaln(df / 2, 0.5))
    np.testing.assert_allclose(log_stdtr(df, t), tail, rtol=RTOL)
    assert np.all(np.isfinite(got))


@pytest.mark.parametrize("df", DFS)
def test_ppf_against_scipy_and_the_round_trip(df):
    got = stdtrit(df, U)
    with np.errstate(all="ignore"):
        want = special.stdtrit(df, U)
    # scipy where its quantile is moderate (it is wrong far out for small df)
    mid = np.isfinite(want) & (np.abs(want) < 1e8)
    low = np.minimum(U, 1.0 - U)  # exact
    if df == 1.0:  # exact: -cot(pi u)
        want = np.sign(U - 0.5) / np.tan(np.pi * low)
        mid = np.abs(U - 0.5) > 0  # everywhere
    np.testing.assert_allclose(got[mid], want[mid], rtol=RTOL, atol=0)
    # everywhere: the round trip through the reference cdf, relative in the tail
    # probability (a relative error d in t moves it by nu d), beyond |t| = 1e20 (where
    # scipy's cdf underflows for small df) through the tail's power law
    assert np.isfinite(got[U > 1e-30]).all()  # overflow only beyond 1e308
    w = np.abs(got)
    near = w < 1e20
    np.testing.assert_allclose(_reference_cdf(df, -w[near]), low[near],
                               rtol=max(df, 1.0) * RTOL)
    far = ~near & np.isfinite(w)
    tail = ((df / 2 - 1) * math.log(df) - df * np.log(w[far]) - special.betaln(df / 2, 0.5))
    np.testing.assert_allclose(tail, np.log(low[far]), rtol=RTOL)
    assert stdtrit(df, 0.0) == -np.inf and stdtrit(df, 1.0) == np.inf
    assert stdtrit(df, 0.5) == 0.0 and np.isnan(stdtrit(df, 1.5))
    np.testing.assert_array_equal(stdtrit(df, 1.0 - U[U > 0.5]), -stdtrit(df, U[U > 0.5]))


def test_ppf_far_tail_where_scipy_is_wrong():
    """df = 3, u = 1e-300: the tail's power law gives |t| = (1.1027 / u)^(1/3) = 1.03e100
    (scipy's stdtrit says inf)."""
    t = float(stdtrit(3.0, 1e-300))
    c = 3.0 ** 0.5 / special.beta(1.5, 0.5)
    assert t == pytest.approx(-(c / 1e-300) ** (1 / 3), rel=1e-12)


def test_large_df_tends_to_the_normal():
    """df = 1e8 (the family's upper limit): the normal's cdf with its 1/df term,
    Phi(x) - phi(x) (x^3 + x)/(4 df) (the next term is below 1e-13 relative here), and
    the quantile inverts the cdf.  The continued fraction's rounding grows with df: 5e-9
    relative at df = 1e8 (1e-11 at 1e5, 1e-13 at 1e3), which this tolerance states."""
    x = np.linspace(-8, 8, 161)
    want = special.ndtr(x) - stats.norm.pdf(x) * (x**3 + x) / 4e8
    np.testing.assert_allclose(stdtr(1e8, x), want, rtol=1e-8, atol=0)
    u = np.array([1e-12, 1e-4, 0.3, 0.7, 1 - 1e-9])
    np.testing.assert_allclose(stdtr(1e8, stdtrit(1e8, u)), u, rtol=1e-8)


def test_the_family_compiles_its_own_primitives():
    """base_cdf, base_sf, base_ppf of the family are these functions, for arrays and
    compiled for one value (no scipy)."""
    from dpbook.model.compiler import compiled_primitive, family_state

    fam = get_family("student_t", df=2.5)
    z = np.array([-40.0, -3.0, 0.0, 0.5, 7.0])
    np.testing.assert_allclose(fam.base_cdf(z), special.stdtr(2.5, z), rtol=RTOL)
    np.testing.assert_allclose(fam.base_sf(z), special.stdtr(2.5, -z), rtol=RTOL)
    for name, args in (("base_cdf", z), ("base_sf", z), ("base_ppf", U[::50])):
        fn = compiled_primitive(fam, name, tuple(args))
        st = family_state(fam)

        @njit
        def call(s, v, fn=fn):
            return fn(s, v)

        got = np.array([call(st[0], v) for v in args])
        np.testing.assert_array_equal(got, getattr(fam, name)(args))


@pytest.mark.slow
def test_student_t_runs_every_engine_compiled_without_a_warning():
    """MHAAR, Algorithm 4, the exact posterior's grid and the marginal SMC's likelihood:
    each picks its compiled path for the Student-t (each warned and fell back to numpy
    while its cdf and quantiles were scipy's), the latent SMC too (proposing by its
    keyed draw, ``StudentT.base_draw``), without a warning."""
    import warnings

    from dpbook.backends import backend
    from dpbook.fisher import mc_primitives as mc
    from dpbook.mhaar.compiled_chain import _compiled
    from dpbook.model.mechanisms import get_mechanism
    from dpbook.posterior.exact import engine_model
    from dpbook.smc.compiled_smc import takes

    fam = get_family("student_t", df=3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert takes(fam, "laplace")
        assert _compiled(fam, get_mechanism("laplace")) is not None
        assert mc.engine_class(fam, "gaussian") is mc.CompiledEngine
        assert engine_model(fam, "laplace") is not None
        assert backend("loglik_particles", fam, "laplace") is not None
