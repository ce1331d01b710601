"""Deterministic references (dpbook.exact): density, score, Fisher information (eq. 7),
Theorem 3, and the grid posterior (5)."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpbook.likelihood import normal_laplace as exact
from dpbook.likelihood.normal_laplace import (
    GL_NODES,
    fisher_exact,
    log_density,
    score,
)
from dpbook.posterior import exact_posterior
from dpbook.posterior.exact import log_prior


def _brute_density(y, l, r, eps, mu, sigma):
    """p(y) by scipy.integrate.quad: atoms at l and r plus the integral over [l, r]."""
    b = (r - l) / eps

    def lap(v):
        return math.exp(-abs(v) / b) / (2 * b)

    u = min(max(y, l), r)

    def f(x):
        return stats.norm.pdf(x, mu, sigma) * lap(y - x)

    mid = 0.0
    for lo, hi in ((l, u), (u, r)):
        if hi > lo:
            mid += integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=200)[0]
    return (stats.norm.cdf(l, mu, sigma) * lap(y - l) + stats.norm.sf(r, mu, sigma) * lap(y - r)
            + mid)


def _random_cases(n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        l = rng.uniform(-3, 2)
        r = l + 10 ** rng.uniform(-1.3, 1)
        eps = 10 ** rng.uniform(-0.7, 1.3)
        b = (r - l) / eps
        mu = rng.uniform(l - 2, r + 2)
        sigma = 10 ** rng.uniform(-0.7, 0.7)
        y = rng.uniform(l - 3 * b, r + 3 * b)
        yield y, l, r, eps, mu, sigma


# ------------------------------------------------------------------ density, score


def test_log_density_matches_quadrature():
    worst = 0.0
    for y, l, r, eps, mu, sigma in _random_cases(60, seed=0):
        worst = max(worst, abs(log_density(y, l, r, eps, mu, sigma)
                               - math.log(_brute_density(y, l, r, eps, mu, sigma))))
    assert worst < 1e-10


def test_log_density_narrow_interval_large_eps():
    # b = 0.01 and sigma^2/b = 100: exp(sigma^2/(2b^2)) = e^5000 would overflow
    l, r, eps = -0.05, 0.05, 10.0
    for y in (-0.3, -0.05, -0.01, 0.0, 0.04, 0.2):
        for mu, sigma in ((0.0, 1.0), (1.5, 1.0), (-0.3, 0.5)):
            got = log_density(y, l, r, eps, mu, sigma)
            assert abs(got - math.log(_brute_density(y, l, r, eps, mu, sigma))) < 1e-10


def test_density_integrates_to_one():
    for l, r, eps, mu, sigma in ((-1.0, 2.0, 1.0, 0.3, 1.2), (-0.06, 0.06, 10.0, 0.0, 1.0),
                                 (2.0, 3.0, 0.5, 0.0, 1.0)):
        b = (r - l) / eps

        def p(y, l=l, r=r, eps=eps, mu=mu, sigma=sigma):
            return math.exp(log_density(y, l, r, eps, mu, sigma))

        # outside [l, r] the density is p(l) e^{(y - l)/b}, p(r) e^{-(y - r)/b}
        mid = integrate.quad(p, l, r, epsabs=0, epsrel=1e-12, limit=200)[0]
        assert abs(b * p(l) + b * p(r) + mid - 1.0) < 1e-10


def test_tails_exponential_and_constant_score():
    l, r, eps, mu, sigma = -0.5, 1.0, 2.0, 0.2, 0.9
    b = (r - l) / eps
    y = np.array([-4.0, -1.0, -0.5])
    np.testing.assert_allclose(log_density(y, l, r, eps, mu, sigma),
                               log_density(l, l, r, eps, mu, sigma) + (y - l) / b, atol=1e-12)
    np.testing.assert_allclose(score(y, l, r, eps, mu, sigma),
                               np.broadcast_to(score(l, l, r, eps, mu, sigma), (3, 2)), atol=1e-10)
    y = np.array([1.0, 2.0, 6.0])
    np.testing.assert_allclose(log_density(y, l, r, eps, mu, sigma),
                               log_density(r, l, r, eps, mu, sigma) - (y - r) / b, atol=1e-12)
    np.testing.assert_allclose(score(y, l, r, eps, mu, sigma),
                               np.broadcast_to(score(r, l, r, eps, mu, sigma), (3, 2)), atol=1e-10)


def test_score_matches_finite_differences():
    h = 1e-6
    worst = 0.0
    for y, l, r, eps, mu, sigma in _random_cases(60, seed=1):
        g = score(y, l, r, eps, mu, sigma)
        fd = np.array([
            log_density(y, l, r, eps, mu + h, sigma) - log_density(y, l, r, eps, mu - h, sigma),
            log_density(y, l, r, eps, mu, sigma + h) - log_density(y, l, r, eps, mu, sigma - h),
        ]) / (2 * h)
        worst = max(worst, np.max(np.abs(g - fd) / (1 + np.abs(fd))))
    assert worst < 1e-6


def test_score_is_fishers_identity_by_quadrature():
    # E[grad log N(X; mu, sigma^2) | Y = y] by quadrature over x, atoms included (Appendix C)
    for y, l, r, eps, mu, sigma in list(_random_cases(6, seed=2)):
        b = (r - l) / eps

        def lap(v, b=b):
            return math.exp(-abs(v) / b) / (2 * b)

        def grad(x, mu=mu, sigma=sigma):
            z = (x - mu) / sigma
            return np.array([z / sigma, (z * z - 1) / sigma])

        # T(x) = l for x <= l and r for x >= r: those parts carry lap(y - l), lap(y - r)
        def part(lo, hi, k, kernel, mu=mu, sigma=sigma):
            return integrate.quad(lambda x: grad(x)[k] * stats.norm.pdf(x, mu, sigma) * kernel(x),
                                  lo, hi, epsabs=1e-15, epsrel=1e-11, limit=200)[0]

        num = np.array([
            part(l, r, k, lambda x, y=y: lap(y - x))
            + lap(y - l) * part(-np.inf, l, k, lambda x: 1.0)
            + lap(y - r) * part(r, np.inf, k, lambda x: 1.0)
            for k in range(2)])
        expect = num / _brute_density(y, l, r, eps, mu, sigma)
        np.testing.assert_allclose(score(y, l, r, eps, mu, sigma), expect, rtol=1e-8, atol=1e-9)


def test_broadcasting_shapes():
    y = np.linspace(-2, 2, 5)[:, None]
    sig = np.array([0.5, 1.0, 2.0])
    assert log_density(y, -1.0, 1.0, 2.0, 0.0, sig).shape == (5, 3)
    assert score(y, -1.0, 1.0, 2.0, 0.0, sig).shape == (5, 3, 2)
    assert isinstance(log_density(0.1, -1.0, 1.0, 2.0, 0.0, 1.0), float)
    s = score(y, -1.0, 1.0, np.array([1.0, 2.0, 4.0]), 0.0, 1.0)
    np.testing.assert_allclose(s[:, 1], score(y[:, 0], -1.0, 1.0, 2.0, 0.0, 1.0), rtol=1e-14)


def test_compiled_kernel_matches_log_density():
    # the numba kernel of the posterior (sum over observations) against the NumPy
    # implementation, including very large sigma/b (narrow intervals, large sigma),
    # far-away mu and observations far outside [l, r]
    rng = np.random.default_rng(3)
    for _ in range(30):
        y = rng.uniform(-5, 5, 6)
        l = rng.uniform(-3, 1, 6)
        r = l + 10 ** rng.uniform(-2, 1.3, 6)
        eps = 10 ** rng.uniform(-1, 1.5)
        mu = rng.uniform(-10, 10, 7)
        sig = 10 ** rng.uniform(-2, 2, 6)
        got = exact.loglik_grid(y, l, r, eps, mu, sig)
        ref = np.sum(log_density(y[:, None, None], l[:, None, None], r[:, None, None], eps,
                                 mu[:, None], sig[None, :]), axis=0)
        assert np.max(np.abs(got - ref) / np.maximum(1, np.abs(ref))) < 1e-12


def test_runs_of_one_interval_give_the_bits_of_each_release_alone():
    """The compiled sum computes what depends on the interval once per run of releases
    with the same interval: its sums and terms are, bit for bit, those of each release
    alone (no run), through every branch: y inside and outside [l, r], the Phi
    differences on either side of 0, the log-space path (k > 20, |mu - y|/b > 200, a
    tiny density)."""
    rng = np.random.default_rng(11)
    ivs = [(-3.0, 1.0), (0.5, 0.6), (-20.0, 20.0), (2.0, 9.0)]
    runs = [ivs[i] for i in rng.integers(0, 4, 12)]
    length = rng.integers(1, 9, 12)
    l = np.concatenate([[a] * k for (a, _), k in zip(runs, length)])
    r = np.concatenate([[b] * k for (_, b), k in zip(runs, length)])
    y = np.where(rng.random(l.size) < 0.2, rng.uniform(-400, 400, l.size),
                 rng.uniform(l - 3, r + 3))
    theta = np.column_stack([np.r_[rng.uniform(-6, 6, 40), 300.0, -300.0, 0.0],
                             np.r_[10 ** rng.uniform(-2.5, 2.5, 40), 1.0, 1.0, 500.0]])
    for eps in (0.5, 5.0, 50.0):
        total = exact.loglik_particles(y, l, r, eps, theta)
        terms = exact.loglik_terms(y, l, r, eps, theta)
        alone = np.array([exact.loglik_particles(y[t:t + 1], l[t:t + 1], r[t:t + 1], eps,
                                                 theta) for t in range(y.size)])
        assert np.array_equal(terms, alone)
        acc = np.zeros(len(theta))
        for t in range(y.size):
            acc = acc + alone[t]
        assert np.array_equal(total, acc)
        grid = exact.loglik_grid(y, l, r, eps, theta[:5, 0], theta[:5, 1])
        assert np.array_equal(np.diag(grid), total[:5])


# ---------------------------------------------------------------------------- Fisher


def _fisher_quad(a, b, eps):
    """int s s^T p dy over the real line by adaptive quadrature (quad_vec), the parts
    outside [a, b] included (no use of the closed-form tails)."""
    B = (b - a) / eps
    lo, hi = min(a, -8.0) - 60 * B, max(b, 8.0) + 60 * B
    edges = [lo] + sorted(p for p in {a, b, 0.0} if lo < p < hi) + [hi]

    def f(y):
        s = score(y, a, b, eps, 0.0, 1.0)
        return math.exp(log_density(y, a, b, eps, 0.0, 1.0)) * np.array(
            [s[0] * s[0], s[0] * s[1], s[1] * s[1]])

    v = sum(integrate.quad_vec(f, p0, p1, epsabs=1e-15, epsrel=1e-12, norm="max")[0]
            for p0, p1 in zip(edges[:-1], edges[1:]))
    return np.array([[v[0], v[1]], [v[1], v[2]]])


@pytest.mark.parametrize("a, b, eps", [
    (-0.06, 0.06, 10.0),   # narrowest grid interval, hardest eps (b = 0.012)
    (-3.0, 3.0, 10.0),     # widest grid interval
    (-3.0, -2.9, 10.0),    # narrow, in the tail
    (-1.0, 2.0, 1.0),
    (-10.0, 10.0, 10.0),   # beyond the +-6 panel breaks
])
def test_fisher_matches_quadrature(a, b, eps):
    Fq = _fisher_quad(a, b, eps)
    F = fisher_exact(a, b, eps)
    assert np.max(np.abs(F - Fq)) < 1e-11 * np.max(np.abs(Fq))
    # GL_NODES is converged: doubling the nodes changes nothing
    assert np.max(np.abs(fisher_exact(a, b, eps, nodes=2 * GL_NODES) - F)) < 1e-13 * np.max(F)


def test_fisher_symmetric_psd_and_zero_cross_term_for_centred_interval():
    g = np.linspace(-3, 3, 13)
    A, B = np.meshgrid(g, g, indexing="ij")
    m = A < B
    F = fisher_exact(A[m], B[m], 2.0)
    assert F.shape == (m.sum(), 2, 2)
    np.testing.assert_array_equal(F[:, 0, 1], F[:, 1, 0])
    assert np.all(np.linalg.eigvalsh(F) > 0)
    Fc = fisher_exact(-0.7, 0.7, 2.0)
    assert abs(Fc[0, 1]) < 1e-14 * Fc[0, 0]
    # more privacy noise, less information
    assert fisher_exact(-0.7, 0.7, 1.0)[0, 0] < Fc[0, 0] < fisher_exact(-0.7, 0.7, 5.0)[0, 0]


@pytest.mark.parametrize("m, c", [(50.0, math.sqrt(10.0)), (-3.0, 0.2), (0.0, 7.0)])
def test_theorem3_location_scale(m, c):
    a = np.array([-2.0, -0.5, -0.06, 0.3])
    b = np.array([1.0, 0.5, 0.06, 2.5])
    for eps in (1.0, 10.0):
        F0 = fisher_exact(a, b, eps)
        np.testing.assert_allclose(fisher_exact(m + a * c, m + b * c, eps, mu=m, sigma=c),
                                   F0 / c**2, rtol=1e-11, atol=1e-14 * np.max(F0) / c**2)


def test_fisher_mu_broadcasting():
    F = fisher_exact(-1.0, 1.0, 2.0, mu=np.array([0.0, 0.5]), sigma=np.array([[1.0], [2.0]]))
    assert F.shape == (2, 2, 2, 2)
    np.testing.assert_allclose(F[1, 0], fisher_exact(-1.0, 1.0, 2.0, 0.0, 2.0))


# ------------------------------------------------------------------------- posterior


def test_log_prior_is_section6_prior():
    mu = np.array([-30.0, 0.0, 12.0])
    sig = np.array([0.3, 1.0, 4.0])
    expect = (stats.norm.logpdf(mu, 0, 100) + stats.invgamma.logpdf(sig**2, 1, scale=1)
              + np.log(2 * sig))
    np.testing.assert_allclose(log_prior(mu, sig), expect, rtol=1e-13)
    val = integrate.quad(lambda s: math.exp(log_prior(0.0, s) - stats.norm.logpdf(0, 0, 100)),
                         0, np.inf)[0]
    assert abs(val - 1) < 1e-8


def _released(n, eps, seed, width=None, adaptive=False):
    rng = np.random.default_rng(seed)
    sd = math.sqrt(10.0)
    x = rng.normal(50.0, sd, n)
    if adaptive:
        l = 50.0 - 0.96 * sd + rng.normal(0, 1, n)
        r = l + 1.92 * sd
    else:
        l = np.full(n, 50.0 - width / 2)
        r = np.full(n, 50.0 + width / 2)
    y = np.clip(x, l, r) + rng.laplace(0.0, (r - l) / eps)
    return x, y, l, r


def test_posterior_normalised_and_summary():
    _, y, l, r = _released(150, 5.0, seed=4, adaptive=True)
    post = exact_posterior(y, l, r, 5.0)
    p = np.exp(post.log_post)
    assert abs(np.sum(p * post.weights[0][:, None] * post.weights[1][None, :]) - 1) < 1e-12
    assert abs(post.weights[0] @ post.marginal(0)[1] - 1) < 1e-12
    assert abs(post.weights[1] @ post.marginal(1)[1] - 1) < 1e-12
    s = post.summary()
    assert set(s) == {"mu", "sigma"} and set(s["mu"]) == {"mean", "sd"}
    assert s["mu"]["mean"] == pytest.approx(post.mean()[0])
    assert s["sigma"]["sd"] == pytest.approx(post.sd()[1])
    q = post.quantile([0.025, 0.5, 0.975])
    assert q.shape == (3, 2) and np.all(np.diff(q, axis=0) > 0)
    # near-Gaussian marginals (sigma a little skewed): median ~ mean, 95% ~ +-1.96 sd
    m, sd = post.mean(), post.sd()
    assert np.all(np.abs(q[1] - m) < 0.2 * sd)
    assert np.all(np.abs((q[2] - q[0]) / (2 * 1.96 * sd) - 1) < 0.1)
    with pytest.raises(ValueError, match="quantile"):
        post.quantile(1.5)
    assert post.edge_density < 1e-15  # the box holds the posterior
    assert post.quad_error < 1e-5
    # unnormalised log posterior at a grid point from the public pieces
    i, j = 40, 55
    direct = (log_prior(post.axes[0][i], post.axes[1][j])
              + np.sum(log_density(y, l, r, 5.0, post.axes[0][i], post.axes[1][j])))
    assert abs(post.log_post[i, j] + post.log_evidence - direct) < 1e-9


def test_posterior_huge_eps_is_raw_data_posterior():
    # eps = 1e6 with a wide interval: b = 2e-4 and no clipping, so Y = X + O(1e-4), and
    # the posterior must be that of the raw data under the normal likelihood
    # (semi-conjugate prior), computed here directly on the same grid.  The privacy
    # noise changes the likelihood only at relative order b^2/sigma^2 ~ 1e-8 per
    # observation, far below the 1e-4 sd tolerance.
    x, y, l, r = _released(200, 1e6, seed=5, width=200.0)
    post = exact_posterior(y, l, r, 1e6)
    mu, sig = post.axes[0][:, None], post.axes[1][None, :]
    lp = log_prior(mu, sig) + np.sum(
        stats.norm.logpdf(x[:, None, None], mu[None], sig[None]), axis=0)
    p = np.exp(lp - lp.max()) * post.weights[0][:, None] * post.weights[1][None, :]
    p /= p.sum()
    mean = np.array([p.sum(1) @ post.axes[0], p.sum(0) @ post.axes[1]])
    sd = np.sqrt([p.sum(1) @ (post.axes[0] - mean[0]) ** 2,
                  p.sum(0) @ (post.axes[1] - mean[1]) ** 2])
    np.testing.assert_allclose(post.mean(), mean, atol=1e-4 * sd.min())
    np.testing.assert_allclose(post.sd(), sd, rtol=1e-4)
    # and the grid resolves the raw-data posterior: mu | sigma is nearly N(xbar, s^2/n)
    assert abs(mean[0] - x.mean()) < 0.02 * sd[0] + 1e-3
    assert abs(sd[0] - x.std() / math.sqrt(len(x))) < 0.02 * sd[0]


@pytest.mark.slow
@pytest.mark.parametrize("n, eps, width", [(150, 5.0, None), (150, 10.0, 6 * math.sqrt(10))])
def test_posterior_stable_under_grid_refinement(n, eps, width):
    # The trapezoid rule on the sinh-mapped grids converges faster than any power of
    # the spacing for a smooth posterior that is negligible at the box edges: 61 and
    # 101 (default) nodes per axis agree with 161 to ~1e-11 posterior sd (measured;
    # the rest is round-off in the moment sums).  Tolerance 1e-9 sd leaves room for
    # platform differences while still failing for any algebraic (h^2) error.
    _, y, l, r = _released(n, eps, seed=6, width=width, adaptive=width is None)
    ref = exact_posterior(y, l, r, eps, grid=(161, 161))
    for g in (61, 101):
        post = exact_posterior(y, l, r, eps, grid=(g, g))
        assert post.axes[0].size == g  # no automatic refinement was needed
        np.testing.assert_allclose(post.mean(), ref.mean(), rtol=0, atol=1e-9 * ref.sd().min())
        np.testing.assert_allclose(post.sd(), ref.sd(), rtol=1e-9)
        # quantiles come from a cubic spline of the marginal density, an algebraic
        # (O(h^4)) approximation: measured 3e-4 sd at 61 nodes, 3e-5 sd at 101
        np.testing.assert_allclose(post.quantile([0.05, 0.5, 0.95]),
                                   ref.quantile([0.05, 0.5, 0.95]), rtol=0,
                                   atol=1e-3 * ref.sd().min())


def test_posterior_explicit_bounds():
    # a uniform grid in (mu, log sigma) on a user box of ~+-12 sd agrees with the
    # automatic sinh grids (1e-6 sd: the uniform grid is coarser at the mode)
    _, y, l, r = _released(150, 10.0, seed=7, adaptive=True)
    auto = exact_posterior(y, l, r, 10.0)
    m, s = auto.mean(), auto.sd()
    cv = s[1] / m[1]  # sd of log sigma, roughly
    box = ((m[0] - 12 * s[0], m[0] + 12 * s[0]),
           (m[1] * math.exp(-12 * cv), m[1] * math.exp(12 * cv)))
    post = exact_posterior(y, l, r, 10.0, grid=(121, 121), bounds=box)
    assert post.axes[0][0] == pytest.approx(box[0][0])
    assert post.axes[1][-1] == pytest.approx(box[1][1])
    np.testing.assert_allclose(np.diff(post.axes[0]), post.axes[0][1] - post.axes[0][0])
    np.testing.assert_allclose(np.diff(np.log(post.axes[1])),
                               math.log(post.axes[1][1] / post.axes[1][0]))
    np.testing.assert_allclose(post.mean(), m, rtol=0, atol=1e-6 * s.min())
    np.testing.assert_allclose(post.sd(), s, rtol=1e-6)


# ------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kw, msg", [
    (dict(eps=0.0), "eps"), (dict(eps=-1.0), "eps"), (dict(eps=np.inf), "eps"),
    (dict(eps=np.nan), "eps"), (dict(l=1.0), "l < r"), (dict(l=2.0), "l < r"),
    (dict(y=np.nan), "y must be finite"), (dict(sigma=0.0), "sigma"),
    (dict(sigma=-1.0), "sigma"), (dict(mu=np.inf), "mu must be finite"),
    (dict(r=np.inf), "finite"),
])
def test_bad_input_density_and_score(kw, msg):
    args = dict(y=0.1, l=-1.0, r=1.0, eps=1.0, mu=0.0, sigma=1.0) | kw
    for fn in (log_density, score):
        with pytest.raises(ValueError, match=msg) as err:
            fn(**args)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("kw, msg", [
    (dict(eps=0.0), "eps"), (dict(eps=np.array([1.0, -2.0])), "eps"),
    (dict(l=1.0), "l < r"), (dict(sigma=0.0), "sigma"), (dict(nodes=0), "nodes"),
])
def test_bad_input_fisher(kw, msg):
    args = dict(l=-1.0, r=1.0, eps=1.0, mu=0.0, sigma=1.0) | kw
    with pytest.raises(ValueError, match=msg):
        fisher_exact(**args)


@pytest.mark.parametrize("kw, msg", [
    (dict(eps=0.0), "eps"), (dict(eps=float("nan")), "eps"),
    (dict(y=[0.0, np.nan]), "y must be finite"), (dict(l=[1.0, 0.0]), "l < r"),
    (dict(y=[], l=[], r=[]), "non-empty"), (dict(grid=(2, 50)), "n_mu"), (dict(grid=5), "pair"),
    (dict(bounds=((1.0, 0.0), (0.1, 2.0))), "bounds"),
    (dict(bounds=((0.0, 1.0), (-0.1, 2.0))), "bounds"), (dict(bounds=(1, 2)), "bounds"),
])
def test_bad_input_posterior(kw, msg):
    args = dict(y=[0.2, 0.5], l=[-1.0, -1.0], r=[1.0, 1.0], eps=1.0) | kw
    with pytest.raises(ValueError, match=msg) as err:
        exact_posterior(**args)
    assert "\n" not in str(err.value)


def test_quantiles_do_not_depend_on_the_grid_spacing():
    """The sigma nodes are geometric in the tails; the quantiles were once a spline in
    sigma itself, which put the median of sigma at 1e12 on a coarse grid (wide noise,
    little data: a long tail)."""
    from dpbook.model.mechanisms import release
    from dpbook.posterior import exact_posterior

    rng = np.random.default_rng(1)
    y = release(rng.normal(0.0, 1.0, 50), -5.0, 5.0, 1.0, rng)
    levels = [0.05, 0.25, 0.5, 0.75, 0.95]
    fine = exact_posterior(y, -5.0, 5.0, 1.0, grid=(101, 101), tol=1e-5).quantile(levels)
    for grid in ((41, 41), (61, 61)):
        coarse = exact_posterior(y, -5.0, 5.0, 1.0, grid=grid, tol=1e-3).quantile(levels)
        np.testing.assert_allclose(coarse, fine, rtol=1e-3, atol=1e-3)
