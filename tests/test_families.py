"""The family interface (dpbook.model.families): every shipped family against independent
computations -- sampler vs cdf, score vs finite differences of logpdf, cdf_grad vs
finite differences of cdf, prior sampler vs log_prior, Gibbs move vs its conditional,
latent parameterisation, the registry and its errors.

Goodness-of-fit tests use fixed seeds and the threshold p > 1e-3; finite differences
are central with a relative step 1e-5, whose truncation error (~1e-10 relative for
these smooth functions) is far below the 1e-6 tolerance.
"""

import math
import sys

import numpy as np
import pytest
from scipy import integrate, stats

from dpbook.model import families as families
from dpbook.model.families import available, get_family
from dpbook.model.prior import LOC_MEAN, LOC_VAR, SCALE2_SCALE, SCALE2_SHAPE

FAMILIES = [("normal", {}), ("laplace", {}), ("student_t", {"df": 5.0}),
            ("student_t", {"df": 3.0}), ("poisson", {})]
IDS = ["normal", "laplace", "student_t5", "student_t3", "poisson"]
N_GOF = 4000


def _thetas(fam):
    if fam.discrete:
        return [(0.7,), (10.0,), (123.0,)]
    return [(0.0, 1.0), (50.0, math.sqrt(10.0)), (-3.0, 0.2)]


def _xs(fam, theta):
    """Points spread over the bulk and tails (never a kink of the Laplace density)."""
    if fam.discrete:
        lam = theta[0]
        return np.unique(np.round(lam + math.sqrt(lam) * np.array([-3, -1, 0, 1, 2, 4])).clip(0))
    m, c = theta
    return m + c * np.array([-6.3, -2.1, -0.37, 0.41, 1.3, 4.7])


def _gof_pvalue(fam, x, theta):
    """KS against the cdf (continuous) or chi-square on cells with >= 5 expected."""
    if not fam.discrete:
        return stats.kstest(x, lambda v: fam.cdf(v, *theta)).pvalue
    lo, hi = fam.ppf(1e-4, *theta), fam.ppf(1 - 1e-4, *theta)
    edges = np.arange(lo, hi + 1.0)  # cells (-inf, lo], {lo+1}, ..., {hi}, (hi, inf)
    cdf = fam.cdf(edges, *theta)
    probs = np.concatenate([[cdf[0]], np.diff(cdf), [fam.sf(edges[-1], *theta)]])
    counts = np.concatenate([[np.sum(x <= lo)], [np.sum(x == k) for k in edges[1:]],
                             [np.sum(x > hi)]])
    exp, obs = [], []
    e_acc = o_acc = 0.0
    for p, o in zip(probs, counts):  # pool cells until >= 5 expected
        e_acc += p * x.size
        o_acc += o
        if e_acc >= 5:
            exp.append(e_acc)
            obs.append(o_acc)
            e_acc = o_acc = 0.0
    exp[-1] += e_acc
    obs[-1] += o_acc
    return stats.chisquare(obs, exp).pvalue


def _fd(fun, theta, j, rel=1e-5):
    t = list(map(float, theta))
    h = rel * max(1.0, abs(t[j]))
    up, dn = list(t), list(t)
    up[j] += h
    dn[j] -= h
    return (np.asarray(fun(*up)) - np.asarray(fun(*dn))) / (2 * h)


@pytest.fixture(params=FAMILIES, ids=IDS)
def fam(request):
    name, opts = request.param
    return get_family(name, **opts)


def test_every_shipped_family_is_tested():
    assert set(available()) == {name for name, _ in FAMILIES}


# ----------------------------------------------------------------- (a) sampler


def test_sampler_matches_cdf(fam):
    rng = np.random.default_rng(101)
    for theta in _thetas(fam):
        x = fam.sample(rng, *theta, size=N_GOF)
        assert x.shape == (N_GOF,)
        assert _gof_pvalue(fam, x, theta) > 1e-3, theta


def test_sampler_broadcasts_theta(fam):
    theta = np.array(_thetas(fam))  # (3, d) particles
    x = fam.sample(np.random.default_rng(1), *fam.theta_args(theta))
    assert x.shape == (3, 1)


def test_sampler_same_seed_same_draws(fam):
    theta = _thetas(fam)[1]
    a = fam.sample(np.random.default_rng(5), *theta, size=50)
    b = fam.sample(np.random.default_rng(5), *theta, size=50)
    np.testing.assert_array_equal(a, b)


def test_density_matches_cdf(fam):
    """logpdf integrates (sums) to the cdf's increments: the two are one distribution."""
    for theta in _thetas(fam):
        lo, hi = fam.ppf(0.01, *theta), fam.ppf(0.9, *theta)
        if fam.discrete:
            k = np.arange(lo + 1, hi + 1)
            got = np.sum(np.exp(fam.logpdf(k, *theta)))
        else:
            got = integrate.quad(lambda x, t=theta: math.exp(fam.logpdf(x, *t)), lo, hi,
                                 points=[theta[0]] if lo < theta[0] < hi else None,
                                 epsabs=0, epsrel=1e-12)[0]
        want = fam.cdf(hi, *theta) - fam.cdf(lo, *theta)
        assert abs(got - want) < 1e-10, theta
        np.testing.assert_allclose(fam.sf(hi, *theta), 1 - fam.cdf(hi, *theta), rtol=1e-10)


# ------------------------------------------------------------ (b, c) derivatives


def test_score_matches_finite_differences(fam):
    for theta in _thetas(fam):
        x = _xs(fam, theta)
        sc = fam.score(x, *theta)
        assert len(sc) == fam.dim
        for j in range(fam.dim):
            fd = _fd(lambda *t, x=x: fam.logpdf(x, *t), theta, j)
            err = np.max(np.abs(np.asarray(sc[j]) - fd) / np.maximum(1.0, np.abs(fd)))
            assert err < 1e-6, (theta, fam.params[j], err)


def test_cdf_grad_matches_finite_differences(fam):
    for theta in _thetas(fam):
        x = _xs(fam, theta)
        if fam.discrete:
            x = np.concatenate([x, x + 0.5])  # the cdf is constant between integers
        g = fam.cdf_grad(x, *theta)
        for j in range(fam.dim):
            fd = _fd(lambda *t, x=x: fam.cdf(x, *t), theta, j)
            scale = max(np.max(np.abs(fd)), 1e-300)
            assert np.max(np.abs(np.asarray(g[j]) - fd)) < 1e-6 * scale, (theta, j)


# -------------------------------------------------------------------- (d) prior


def _prior_mass(fam, j, lo, hi):
    """P(lo < theta_j <= hi) under exp(log_prior), by numerical integration."""
    if fam.dim == 1:
        return integrate.quad(lambda t: math.exp(fam.log_prior(t)), lo, hi, epsrel=1e-10)[0]
    # the shipped two-parameter priors are products: mass = marginal_j / total_j
    other = 1 - j
    ref = [LOC_MEAN, 1.0]

    def dens(t, k):
        args = list(ref)
        args[k] = t
        return math.exp(fam.log_prior(*args))

    full = [(-np.inf, np.inf), (0.0, np.inf)]
    tot_other = integrate.quad(dens, *full[other], args=(other,), epsrel=1e-10)[0]
    part = integrate.quad(dens, lo, hi, args=(j,), epsrel=1e-10, limit=200)[0]
    return part * tot_other / math.exp(fam.log_prior(*ref))


def test_log_prior_normalised_and_matches_sampler(fam):
    """sample_prior's draws fall in bins with the probabilities that exp(log_prior)
    gives them (binomial standard errors, 5 se), and exp(log_prior) integrates to 1."""
    n = 20_000
    draws = fam.sample_prior(np.random.default_rng(7), n)
    assert draws.shape == (n, fam.dim)
    for j, pos in enumerate(fam.positive):
        if pos:
            assert np.all(draws[:, j] > 0)
        edges = np.quantile(draws[:, j], [0.0, 0.1, 0.5, 0.9, 1.0])
        lo_all = 0.0 if pos else -np.inf
        assert abs(_prior_mass(fam, j, lo_all, np.inf) - 1.0) < 1e-8
        for a, b in zip(edges[:-1], edges[1:]):
            p = _prior_mass(fam, j, a, b)
            emp = np.mean((draws[:, j] > a) & (draws[:, j] <= b))
            assert abs(emp - p) < 5 * math.sqrt(p * (1 - p) / n) + 1 / n, (j, a, b, emp, p)
    bad = [-1.0] * fam.dim if fam.dim == 1 else [0.0, -1.0]
    assert fam.log_prior(*bad) == -np.inf


def _gibbs_case(fam):
    rng = np.random.default_rng(3)
    t = 15
    theta = np.array(_thetas(fam)[1])
    x = fam.sample(rng, *theta, size=t)
    n = 20_000
    return rng, np.tile(theta, (n, 1)), np.tile(x, (n, 1)), x


def test_gibbs_targets_the_conditional(fam):
    """The conjugate move samples theta | x_{1:t} (Algorithm 3, step 4).

    (i) the closed-form conditional it draws from is exp(log_prior + sum logpdf) up to
    a constant (checked at several points), and (ii) its draws follow that closed form
    (KS).  Together: the move leaves p(theta | x) invariant.  Families without a
    conjugate move return None (the SMC then uses random-walk MH).
    """
    rng, theta, xs, x = _gibbs_case(fam)
    out = fam.gibbs(rng, theta, xs)
    if fam.name in ("laplace", "student_t"):
        assert out is None
        return
    assert out.shape == theta.shape
    t = x.size

    def target(*th):
        return fam.log_prior(*th) + np.sum(fam.logpdf(x[:, None], *th), axis=0)

    if fam.name == "poisson":
        a, rate = 1.0 + x.sum(), 0.01 + t
        lam = np.linspace(5.0, 20.0, 7)
        diff = stats.gamma.logpdf(lam, a, scale=1 / rate) - target(lam)
        assert np.ptp(diff) < 1e-9
        assert stats.kstest(out[:, 0], stats.gamma(a, scale=1 / rate).cdf).pvalue > 1e-3
        return
    # normal: mu | sigma0 ~ N(m, v), then sigma^2 | new mu ~ IG(a + t/2, b + ss/2)
    s0 = theta[0, 1]
    v = 1.0 / (1.0 / LOC_VAR + t / s0**2)
    m = v * (LOC_MEAN / LOC_VAR + x.sum() / s0**2)
    mus = np.linspace(m - 3 * math.sqrt(v), m + 3 * math.sqrt(v), 7)
    diff = stats.norm.logpdf(mus, m, math.sqrt(v)) - target(mus, s0)
    assert np.ptp(diff) < 1e-9
    assert stats.kstest(out[:, 0], stats.norm(m, math.sqrt(v)).cdf).pvalue > 1e-3
    mu1 = float(out[0, 0])
    ss = np.sum((x - mu1) ** 2)
    a, b = SCALE2_SHAPE + 0.5 * t, SCALE2_SCALE + 0.5 * ss
    sig = np.linspace(2.0, 5.0, 7)
    log_ig_sigma = stats.invgamma.logpdf(sig**2, a, scale=b) + np.log(2 * sig)
    assert np.ptp(log_ig_sigma - target(mu1, sig)) < 1e-9
    # sigma^2 given each drawn mu: (b + ss_i/2)/sigma_i^2 ~ Gamma(a, 1)
    g = (SCALE2_SCALE + 0.5 * np.sum((x[None, :] - out[:, :1]) ** 2, axis=1)) / out[:, 1] ** 2
    assert stats.kstest(g, stats.gamma(a).cdf).pvalue > 1e-3


# ------------------------------------------------------------------- (e) latent


def test_latent_parameterisation(fam):
    """x = from_latent(u, theta) with u = latent_sample(...) is distributed as P_theta
    (the theta-free latent variable MHAAR moves)."""
    rng = np.random.default_rng(11)
    u = fam.latent_sample(rng, N_GOF)
    for theta in _thetas(fam):
        x = fam.from_latent(u, *theta)
        assert _gof_pvalue(fam, np.asarray(x, float), theta) > 1e-3, theta


# ---------------------------------------------------------- (f) registry, errors


def test_get_family_errors():
    with pytest.raises(ValueError, match="unknown family"):
        get_family("gamma")
    with pytest.raises(ValueError, match="no option 'nu'"):
        get_family("student_t", nu=3)
    with pytest.raises(ValueError, match="no option"):
        get_family("normal", df=3)
    for bad in (0, -1.0, float("nan"), float("inf"), "three", None):
        with pytest.raises(ValueError, match="df"):
            get_family("student_t", df=bad)
    with pytest.raises(ValueError, match="family"):
        families.as_family(3.0)


def test_as_family():
    assert families.as_family(None).name == "normal"
    assert families.as_family("poisson").name == "poisson"
    fam = get_family("student_t", df=3)
    assert families.as_family(fam) is fam
    assert fam.df == 3.0 and "df=3" in fam.describe()


def test_check_theta(fam):
    good = _thetas(fam)[1]
    assert fam.check_theta(*good) == tuple(float(v) for v in good)
    with pytest.raises(ValueError, match="parameters"):
        fam.check_theta(*good, 1.0)
    for j, (name, pos) in enumerate(zip(fam.params, fam.positive)):
        bads = [float("nan"), float("inf"), "x"] + ([0.0, -1.0] if pos else [])
        for bad in bads:
            theta = list(good)
            theta[j] = bad
            with pytest.raises(ValueError, match=name):
                fam.check_theta(*theta)


def test_support_and_interval_helpers(fam):
    for theta in _thetas(fam):
        lo, hi = fam.support(*theta)  # P(X < lo), P(X > hi) <= 1e-14
        below = fam.cdf(lo - 1, *theta) if fam.discrete else fam.cdf(lo, *theta)
        assert below <= 2e-14 and fam.sf(hi, *theta) <= 2e-14
        a, b = fam.interval_lims(*theta)
        assert a < b
        lc, rc = fam.fixed_interval(*theta)
        assert lc < rc
    theta = fam.default_theta()
    assert fam.check_theta(*theta) == tuple(map(float, theta))


def test_registry_discovers_a_dropped_module(tmp_path, monkeypatch):
    """A module defining a Family subclass in the package's path is found by name,
    with no other change (the module lives in a temporary directory added to the
    package's search path, so nothing is left behind in the source tree)."""
    (tmp_path / "zz_test_uniform.py").write_text(
        "import numpy as np\n"
        "from dpbook.model.families.base import LocationScaleFamily\n\n\n"
        "class Uniform(LocationScaleFamily):\n"
        "    name = 'zz_test_uniform'\n"
        "    def base_logpdf(self, z):\n"
        "        return np.where(np.abs(z) <= 0.5, 0.0, -np.inf)\n")
    monkeypatch.setattr(families, "__path__", [*families.__path__, str(tmp_path)])
    monkeypatch.setattr(families, "_REGISTRY", None)
    try:
        reg = available()
        assert "zz_test_uniform" in reg
        assert list(reg)[0] == "normal"
        fam = get_family("zz_test_uniform")
        assert fam.logpdf(0.2, 0.0, 1.0) == 0.0
    finally:
        sys.modules.pop("dpbook.model.families.zz_test_uniform", None)
    monkeypatch.undo()
    assert "zz_test_uniform" not in available()


def test_densities_agree_with_scipy():
    # the normalising constants and the Laplace cdf against scipy.stats
    fam = get_family("student_t", df=3)
    z = np.array([-4.0, 0.0, 2.5])
    np.testing.assert_allclose(fam.base_logpdf(z), stats.t.logpdf(z, 3), rtol=1e-13)
    np.testing.assert_allclose(get_family("laplace").base_cdf(z), stats.laplace.cdf(z),
                               rtol=1e-13)
    np.testing.assert_allclose(get_family("poisson").logpdf(np.array([0.0, 3.0, 7.0]), 2.5),
                               stats.poisson.logpmf([0, 3, 7], 2.5), rtol=1e-13)


def test_poisson_quantiles_are_scipys():
    """The Poisson's tabled quantile (dpbook.model.families.poisson) is scipy's, over
    lam from 1e-3 to 3e7 and q into both tails, and falls back to scipy off its path."""
    fam = get_family("poisson")
    rng = np.random.default_rng(0)
    for lam in [1e-3, 0.5, 1.0, 7.3, 10.0, 123.4, 1e4, 1e6, 3e7]:
        q = np.concatenate([rng.random(500), rng.random(20) ** 40,
                            1 - rng.random(20) ** 40, [1e-300, 1e-17, 1 - 1e-16]])
        np.testing.assert_array_equal(fam.ppf(q, lam), stats.poisson.ppf(q, lam))
    edge = [0.0, 1.0, 0.5, -1.0, np.nan]
    np.testing.assert_array_equal(fam.ppf(edge, 3.0), stats.poisson.ppf(edge, 3.0))
