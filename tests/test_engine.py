"""The compiled engine of the latent SMC (dpbook.smc.compiled_smc) and the vectorisable
elementary functions it compiles a family with (dpbook.vmath)."""

import warnings

import numba
import numpy as np
import pytest
from numba import njit
from posterior_oracle import exact_posterior_quadrature
from scipy import special, stats
from test_smc_family import EPS, N_PART, R, Z, _close, _stats

from dpbook import vmath
from dpbook.model.compiler import compiled_family
from dpbook.model.families import get_family
from dpbook.model.families.base import Family, LocationScaleFamily
from dpbook.model.families.normal import Normal
from dpbook.model.mechanisms import release
from dpbook.rng import keyed_uniform, keyed_word
from dpbook.smc import SMC, smc_posterior
from dpbook.smc.compiled_smc import CompiledSMC, takes
from dpbook.smc.paper_kernel import NormalLaplaceSMC


class Logistic(LocationScaleFamily):
    """A family written as a user writes one (chapter 7): numpy only.  The code is that
    of the page "Extending dpbook" and of tests/test_extending.py, so the kernels
    compiled for one are loaded from numba's cache for the others (keyed by content)."""

    name = "logistic"

    def base_logpdf(self, z):
        return -np.abs(z) - 2 * np.log1p(np.exp(-np.abs(z)))

    def base_dlogpdf(self, z):
        return -np.tanh(z / 2)

    def base_cdf(self, z):
        return special.expit(z)

    def base_ppf(self, q):
        return np.log(q) - np.log1p(-q)

    def base_sample(self, rng, size=None):
        return rng.logistic(0.0, 1.0, size)


class ScipyLogistic(Logistic):
    """The same family with scipy.stats in its quantile function: numba cannot compile
    it."""

    name = "scipy_logistic"

    def base_ppf(self, q):
        return stats.logistic.ppf(q)


# ------------------------------------------------------------------ dpbook.vmath
def _values(name):
    e = np.exp(np.linspace(-745.0, 709.0, 40001))
    return {"exp": np.concatenate([np.linspace(-750.0, 715.0, 40001), [-np.inf, np.inf]]),
            "log": np.concatenate([e, [0.0, 5e-324, 1e-310, 1.0, 1.0 + 2**-52, np.inf]]),
            "log1p": np.concatenate([np.linspace(-1.0, 3.0, 40001), e, -e[e < 1.0],
                                     [np.inf, -1.0]]),
            "expm1": np.concatenate([np.linspace(-50.0, 50.0, 40001), e[e < 700.0],
                                     -e[e < 700.0]])}[name]


@pytest.mark.parametrize("name, ulps", [("exp", 1), ("log", 2), ("log1p", 3), ("expm1", 4)])
def test_vmath_agrees_with_numpy(name, ulps):
    """Within a few units in the last place of numpy's function over its whole range,
    and the same special values (0, inf, nan)."""
    _agrees(name, np.concatenate([_values(name), [np.nan, -2.0]]), getattr(np, name), ulps)


def _agrees(name, x, reference, ulps):
    """vmath's ``name`` on x within ``ulps`` units in the last place of reference(x), and
    the same non-finite values and zeros."""
    f = getattr(vmath, name)

    @njit(error_model="numpy")
    def evaluate(x, out):
        for i in range(x.shape[0]):
            out[i] = f(x[i])

    got = np.empty_like(x)
    evaluate(x, got)
    with np.errstate(all="ignore"):
        want = reference(x)
    finite = np.isfinite(want) & (want != 0.0)
    err = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))
    assert err.max() <= ulps, (name, err.max(), x[finite][err.argmax()])
    np.testing.assert_array_equal(got[~finite], want[~finite])  # nan == nan here


@pytest.mark.slow
@pytest.mark.parametrize("name, ulps", [("ndtri", 8), ("logit", 4), ("expit", 3)])
def test_vmath_agrees_with_scipy(name, ulps):
    e = np.exp(np.linspace(-745.0, -1e-9, 20001))
    x = (np.linspace(-700.0, 700.0, 20001) if name == "expit" else
         np.concatenate([np.linspace(0.0, 1.0, 20001), e, 1.0 - e[e > 1e-16],
                         [np.nan, -1.0, 2.0]]))
    _agrees(name, x, getattr(special, name), ulps)


def test_vmath_vectorises():
    """The point of the module: a loop of vmath.log compiles to vector instructions
    (a loop of math.log does not)."""

    @njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = vmath.log(x[i]) + vmath.exp(x[i])

    loop(np.ones(8), np.ones(8))
    llvm = loop.inspect_llvm(loop.signatures[0])
    assert "x double>" in llvm


def test_compile_scalar_takes_numpy_array_code():
    """np.where, np.minimum, np.asarray (the shipped Laplace family's ppf) and the
    elementary functions compile for one value, with numpy's results."""
    fam = get_family("laplace")
    ppf = vmath.compile_scalar(type(fam).base_ppf)

    @njit
    def call(q):
        return ppf(None, q)

    for q in (1e-300, 0.1, 0.5, 0.7, 1 - 1e-16):
        assert call(q) == pytest.approx(float(fam.base_ppf(q)), rel=1e-15)


# ------------------------------------------------------------------ the engine
@pytest.mark.slow
def test_which_models_run_the_engine():
    assert type(SMC(1.0, Logistic())) is CompiledSMC
    assert type(SMC(1.0, "laplace", "gaussian")) is CompiledSMC
    assert type(SMC(1.0, Logistic(), generic=True)) is SMC  # the numpy reference
    # the normal family's conjugate move compiled (engine_gibbs), any prior; the paper's
    # model keeps its own kernel, and a subclass of the normal family inherits both
    assert takes(get_family("normal"), "gaussian")
    narrow = Normal().with_prior(loc_mean=0.0, loc_var=1.0)
    assert SMC.for_model(narrow, "gaussian") is CompiledSMC
    assert SMC.for_model(narrow, "laplace") is NormalLaplaceSMC
    assert SMC.for_model("normal", "laplace") is NormalLaplaceSMC
    mine = type("MyNormal", (Normal,), {"name": "my_normal"})()
    assert type(SMC(1.0, mine)) is NormalLaplaceSMC
    assert type(SMC(1.0, mine, "gaussian")) is CompiledSMC
    # ... and one that changes the density is another model: not the paper's kernel
    logistic_body = type("NormalBody", (Normal,), {"base_logpdf": Logistic.base_logpdf})()
    assert SMC.for_model(logistic_body, "laplace") is not NormalLaplaceSMC
    # the Student-t proposes by its keyed draw (base_draw), not its slow quantile
    assert compiled_family(get_family("student_t", df=3)).draw is not None
    assert compiled_family(Logistic()).draw is None
    for fam, mech in (("student_t", "laplace"), ("student_t", "gaussian"),
                      ("normal", "gaussian"), ("laplace", "laplace")):
        assert SMC.for_model(fam, mech) is CompiledSMC, (fam, mech)
    assert not takes(get_family("poisson"), "laplace")  # not location-scale
    assert SMC.for_model("poisson", "laplace") is SMC


class OwnGibbs(Normal):
    """A subclass with a conjugate move of its own and no compiled form of it: the
    normal family's compiled move is not taken for it (the numpy SMC runs)."""

    name = "own_gibbs"

    def gibbs(self, rng, theta, x):
        return super().gibbs(rng, theta, x)


@pytest.mark.slow
def test_a_gibbs_without_its_compiled_form_runs_numpy():
    assert not takes(OwnGibbs(), "gaussian")
    assert takes(NormalRW(), "gaussian")  # random walk, compiled


@pytest.mark.slow
def test_student_t_keyed_draws_are_t_distributed():
    """The Student-t's draws as the engine makes them, KS against scipy's t_df (df 0.5:
    the gamma's boost below shape 1): base_draw from the states of the words of one
    particle's sequence (keyed_word) and along one stream (propagation), and
    base_draw_pair (Bailey's polar method) from pairs of keyed uniforms, its accepted
    draws (about pi/4 of them; the rejected ones are nan)."""
    cf = compiled_family(get_family("student_t"))
    draw, pair = cf.draw, cf.pair  # one compiled form for every df (self.df is read)

    @njit
    def draws(fs, base, n):
        out = np.empty((3, n))
        s = base
        for j in range(n):
            out[0, j] = draw(fs, keyed_word(base, j))[1]
            s, out[1, j] = draw(fs, s)
            out[2, j] = pair(fs, keyed_uniform(base, 2 * j), keyed_uniform(base, 2 * j + 1))
        return out

    for df in (0.5, 3.0, 40.0):
        cf = compiled_family(get_family("student_t", df=df))
        assert cf.draw is draw and cf.pair is pair
        out = draws(cf.state[0], np.uint64(0x5EED + int(df * 10)), 20000)
        ok = ~np.isnan(out[2])
        se = np.sqrt(np.pi / 4 * (1 - np.pi / 4) / ok.size)
        assert abs(ok.mean() - np.pi / 4) < 5 * se
        for row in (out[0], out[1], out[2][ok]):
            assert stats.kstest(row, stats.t(df).cdf).pvalue > 1e-3, df


TRUTH = (1.0, 2.0)
BOX = ((-7.0, 9.0), (0.05, 16.0))


def _data(fam, mech, n=30, seed=0):
    rng = np.random.default_rng(seed)
    x = fam.sample(rng, *TRUTH, size=n)
    l, r = np.full(n, TRUTH[0] - 3 * TRUTH[1]), np.full(n, TRUTH[0] + 3 * TRUTH[1])
    return release(x, l, r, EPS, rng, mech), l, r


class NormalRW(Normal):
    """The normal family moved by the engine's random walk instead of its Gibbs move
    (its base_ppf is scipy's ndtri, which compile_scalar maps to vmath.ndtri)."""

    name = "normal_rw"
    gibbs = Family.gibbs


@pytest.mark.slow
@pytest.mark.parametrize("fam, mech", [(Logistic(), "laplace"), (Logistic(), "gaussian"),
                                       (get_family("laplace"), "laplace"),
                                       (NormalRW(), "laplace"),
                                       # the keyed draw and the compiled Gibbs move
                                       (get_family("student_t", df=3.0), "laplace"),
                                       (get_family("normal"), "gaussian")],
                         ids=lambda v: getattr(v, "name", v))
def test_engine_matches_exact_posterior(fam, mech):
    """Posterior means and sds against the quadrature reference, within Z = 5 standard
    errors of the average of R = 8 independent runs (as the numpy SMC's test).

    False failures: (average - exact)/se is ~t_7 if the runs are unbiased, P(|t_7| > 5)
    = 0.16% per comparison, 4 per model: about 0.6% per model, 4% over the 6.  Smallest
    error detected: a bias of 5 se (se = one run's Monte Carlo sd / sqrt(8)) half the
    time, 8 se almost always."""
    y, l, r = _data(fam, mech)
    post = exact_posterior_quadrature(y, l, r, EPS, fam, mech, grid=(61, 61), bounds=BOX)
    assert post.edge < -12, post.edge
    runs = [smc_posterior(y, l, r, EPS, fam, mech, n_particles=N_PART, seed=s)
            for s in range(R)]
    assert all(type(s) is CompiledSMC for s in runs)
    m, sd = _stats(runs, fam.params)
    _close(m, post.mean(), f"{fam.name} means")
    _close(sd, post.sd(), f"{fam.name} sds")


@pytest.mark.slow
def test_engine_agrees_with_numpy_reference_longer_stream():
    """120 releases, subset rejuvenation too: the engine against the numpy SMC (both
    random; R runs each), means within Z standard errors of their difference.

    False failures: about t_14, P(|t| > 5) = 2e-4 per comparison, 4 comparisons: 0.1%.
    Smallest difference detected: 5 se of the difference of the averages half the time."""
    fam = Logistic()
    y, l, r = _data(fam, "laplace", n=120, seed=3)
    for subset in (None, 15):
        a = [smc_posterior(y, l, r, EPS, fam, n_particles=500, seed=s, subset=subset)
             for s in range(R)]
        b = [smc_posterior(y, l, r, EPS, fam, n_particles=500, seed=50 + s, subset=subset,
                           generic=True) for s in range(R)]
        ma, mb = _stats(a, fam.params)[0], _stats(b, fam.params)[0]
        se = np.sqrt(ma.var(axis=0, ddof=1) / R + mb.var(axis=0, ddof=1) / R)
        assert np.all(np.abs(ma.mean(axis=0) - mb.mean(axis=0)) < Z * se), (subset, ma, mb)


@pytest.mark.slow
def test_engine_bits_do_not_depend_on_threads():
    fam = Logistic()
    y, l, r = _data(fam, "laplace", n=40)  # N t above _PARALLEL_WORK: threads are used
    before = numba.get_num_threads()
    out = []
    try:
        for k in (1, max(2, before)):
            numba.set_num_threads(min(k, numba.config.NUMBA_NUM_THREADS))
            s = smc_posterior(y, l, r, EPS, fam, n_particles=2000, seed=7)
            out.append((s.theta.copy(), s.w.copy(), s.paths()))
    finally:
        numba.set_num_threads(before)
    for a, b in zip(*out):
        assert a.tobytes() == b.tobytes()


@pytest.mark.slow
def test_engine_same_seed_same_bits_and_history():
    fam = Logistic()
    y, l, r = _data(fam, "gaussian", n=25)
    a = smc_posterior(y, l, r, EPS, fam, "gaussian", n_particles=200, seed=[4, 2])
    b = smc_posterior(y, l, r, EPS, fam, "gaussian", n_particles=200, seed=[4, 2])
    c = smc_posterior(y, l, r, EPS, fam, "gaussian", n_particles=200, seed=[4, 3])
    assert a.theta.tobytes() == b.theta.tobytes() and a.theta.tobytes() != c.theta.tobytes()
    h = a.history
    assert len(h.mean_loc) == 25 and 0.0 < np.nanmean(h.acceptance) < 1.0
    assert 0.0 < np.nanmean(h.theta_acceptance) < 1.0


def test_engine_in_a_forked_worker_after_the_parent_ran_it():
    """The kernel's thread pool is per process: a worker forked after the parent ran the
    engine runs it too (it would wait for its parent's threads, which it has not)."""
    import multiprocessing

    fam = Logistic()
    y, l, r = _data(fam, "laplace", n=40)  # N t above _PARALLEL_WORK: threads are used
    want = smc_posterior(y, l, r, EPS, fam, n_particles=2000, seed=2).theta
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_theta_in_worker, (y, l, r)).get(timeout=120)
    assert got.tobytes() == want.tobytes()


def _theta_in_worker(y, l, r):
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    return smc_posterior(y, l, r, EPS, Logistic(), n_particles=2000, seed=2).theta


@pytest.mark.slow
def test_a_family_without_a_cdf_still_runs_the_engine():
    """The SMC needs only base_logpdf and base_ppf; the check that the particles found
    the posterior (dpbook.diagnostics) needs the release density, so it is skipped."""

    class Bare(LocationScaleFamily):
        name = "bare_logistic"
        base_logpdf = Logistic.base_logpdf
        base_dlogpdf = Logistic.base_dlogpdf
        base_ppf = Logistic.base_ppf

    y, l, r = _data(Logistic(), "laplace", n=15)
    s = smc_posterior(y, l, r, EPS, Bare(), n_particles=100, seed=1)
    assert type(s) is CompiledSMC and s.lost is None


def test_engine_fast_test_decides_as_the_exact_one(monkeypatch):
    # every row swept again with vmath.log (EXP_TOL huge) gives the same bits as the
    # fast test with its rare re-decisions
    from dpbook import vmath

    fam = Logistic()
    y, l, r = _data(fam, "laplace", n=30)
    s = smc_posterior(y, l, r, EPS, fam, n_particles=300, seed=11)
    monkeypatch.setattr(vmath, "EXP_TOL", 1e300)
    exact = smc_posterior(y, l, r, EPS, fam, n_particles=300, seed=11)
    assert exact.paths().tobytes() == s.paths().tobytes()


def test_engine_information_matches_numpy():
    # J of the random walk's covariance, compiled from base_dlogpdf, against the numpy
    # scores of SMC._information
    fam = Logistic()
    y, l, r = _data(fam, "laplace", n=50)
    s = smc_posterior(y, l, r, EPS, fam, n_particles=300, seed=2)
    assert compiled_family(fam).information is not None
    th, x = s.theta[:128], s._x[0][:128, :50]
    np.testing.assert_allclose(s._information(th, x), SMC._information(s, th, x),
                               rtol=1e-12)


class OpaqueScoreLogistic(Logistic):
    """base_dlogpdf through scipy.stats: numba cannot compile it; the engine runs with
    the numpy information matrix."""

    name = "opaque_score_logistic"

    def base_dlogpdf(self, z):
        return -1.0 + 2.0 * stats.logistic.sf(z)


@pytest.mark.slow
def test_engine_with_a_score_that_does_not_compile():
    fam = OpaqueScoreLogistic()
    y, l, r = _data(fam, "laplace", n=30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = smc_posterior(y, l, r, EPS, fam, n_particles=200, seed=2)
    assert isinstance(s, CompiledSMC) and compiled_family(fam).information is None
    th, x = s.theta[:64], s._x[0][:64, :30]
    np.testing.assert_allclose(s._information(th, x), SMC._information(s, th, x),
                               rtol=1e-14)


def test_a_subclass_of_the_normal_family_keeps_every_fast_path():
    """Dispatch by inheritance: a subclass that only names itself (or adds options)
    gets every compiled path of the paper's model; one that defines its density anew
    is another model and gets none of them."""
    from dpbook import backends
    from dpbook.model.families.base import inherits_model

    mine = type("MyNormal", (Normal,), {"name": "my_normal"})()
    other = type("NormalBody", (Normal,), {"base_logpdf": Logistic.base_logpdf})()
    assert inherits_model(mine, Normal) and not inherits_model(other, Normal)
    registered = [a for a, fam, _ in backends._REGISTRY if fam is Normal]
    assert len(registered) == 7
    for algorithm in registered:
        paper = backends.backend(algorithm, "normal", "laplace")
        assert backends.backend(algorithm, mine, "laplace") is paper, algorithm
        assert backends.backend(algorithm, other, "laplace") is not paper, algorithm
    assert SMC.for_model(mine) is NormalLaplaceSMC
    assert SMC.for_model(other) is not NormalLaplaceSMC
