"""Extending dpbook from outside the package: a family, a mechanism, an interval policy
and a backend, each defined in this file alone and run through the public entry points
(the book's page "Extending dpbook" shows the same code)."""

import json

import numpy as np
import pytest
from scipy import special, stats

from dpbook import backends
from dpbook.cli import main
from dpbook.fisher import best_interval, fisher_exact, fisher_mc
from dpbook.model.checks import check_family
from dpbook.model.families import LocationScaleFamily, register_family, unregister_family
from dpbook.model.mechanisms import (
    LaplaceMechanism,
    Mechanism,
    clip,
    register_mechanism,
    release,
    unregister_mechanism,
)
from dpbook.online import run_online
from dpbook.posterior import exact_posterior
from dpbook.privacy.policies import Policy
from dpbook.privacy.population import family_population
from dpbook.smc import SMC


# --------------------------------------------------------------------------- a family
class Logistic(LocationScaleFamily):
    """Logistic(loc, scale): only the base distribution g is written (Definition 2)."""

    name = "logistic"
    summary = "Logistic(loc, scale): a location-scale family defined in a test"

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


def _agree(exact, est, k=5.0):
    """Exact and Monte Carlo information agree within k Monte Carlo standard errors."""
    assert np.all(np.abs(est.F - exact) <= k * est.se + 1e-12), (exact, est.F, est.se)


@pytest.mark.slow
def test_a_new_family_runs_everywhere():
    fam = Logistic()
    assert check_family(fam, rng=0)["passed"].all()
    # eq. (7) by quadrature against eq. (8) with Algorithm 4
    _agree(fisher_exact(-1.0, 1.5, 2.0, family=fam),
           fisher_mc(-1.0, 1.5, 2.0, family=fam, M=4000, K=4000, rng=1))
    # location-scale: the best interval is computed once, at theta = (0, 1) (eq. 13)
    best = best_interval(2.0, family=fam, grid=12)
    assert -3 <= best["a"] < best["b"] <= 3
    pop = family_population(fam, (2.0, 0.5), 60, 5.0, seed=3)
    y = np.array([pop.release(-1.0, 5.0) for _ in range(60)])
    l, r = np.full(60, -1.0), np.full(60, 5.0)
    post = exact_posterior(y, l, r, 5.0, family=fam, grid=(60, 60))
    smc = SMC(5.0, fam, n_particles=400, n_max=60, seed=4)
    for t in range(60):
        smc.update(y[t], l[t], r[t])
    for p in ("loc", "scale"):
        q = post.summary()[p]
        assert abs(smc.summary()[p]["mean"] - q["mean"]) < 0.5 * q["sd"]
    # by name, for the command line and the experiment
    register_family(Logistic)
    try:
        code = main(["fisher", "--family", "logistic", "--eps", "2", "--a", "-1",
                     "--b", "1.5", "--json"])
        assert code == 0
    finally:
        unregister_family("logistic")


# ------------------------------------------------------------------------ a mechanism
class LogisticNoise(Mechanism):
    """Additive logistic noise of scale b = (r - l)/eps (not a DP mechanism of the paper;
    it shows what a mechanism must provide)."""

    name = "logistic_noise"

    def logpdf(self, v, scale):
        z = np.abs(np.asarray(v, float) / scale)
        return -z - 2 * np.log1p(np.exp(-z)) - np.log(scale)

    def cdf(self, v, scale):
        return special.expit(np.asarray(v, float) / scale)

    def sample(self, rng, size=None):
        return rng.logistic(0.0, 1.0, size)

    def variance(self, scale):
        return np.pi**2 / 3 * np.asarray(scale, float) ** 2

    def tail(self, scale, tol=1e-16):
        return np.asarray(scale, float) * float(-np.log(tol))


def test_a_new_mechanism_runs_everywhere(capsys):
    mech = LogisticNoise()
    x = np.random.default_rng(0).normal(0.0, 1.0, 20_000)
    y = release(x, -1.0, 2.0, 1.5, np.random.default_rng(1), mechanism=mech)
    v = (y - clip(x, -1.0, 2.0)) / (3.0 / 1.5)
    assert stats.kstest(v, lambda u: mech.cdf(u, 1.0)).pvalue > 1e-3
    # the normal family with this mechanism runs the generic code: exact vs MC
    assert backends.backend("fisher_exact", None, mech) is None
    _agree(fisher_exact(-1.0, 1.0, 2.0, mechanism=mech),
           fisher_mc(-1.0, 1.0, 2.0, mechanism=mech, M=4000, K=4000, rng=2))
    register_mechanism(mech)
    try:
        assert main(["fisher", "--mechanism", "logistic_noise", "--eps", "2", "--a", "-1",
                     "--b", "1", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        np.testing.assert_allclose(out["F"], fisher_exact(-1.0, 1.0, 2.0, mechanism=mech))
    finally:
        unregister_mechanism("logistic_noise")
    assert main(["fisher", "--mechanism", "logistic_noise", "--eps", "2"]) == 2


# --------------------------------------------------------------------- a policy
class PosteriorBand(Policy):
    """[m - k c, m + k c] at the posterior means (m, c) of the SMC: not the paper's
    Thompson sampling, a deterministic plug-in rule."""

    name = "band"

    def __init__(self, k=2.0, start=(-10.0, 10.0)):
        self.k, self.start, self.seen = k, start, []

    def next_interval(self, posterior, rng):
        assert isinstance(posterior, SMC)  # a policy sees the estimator, never the data
        if posterior.t == 0:
            lr = self.start
        else:
            s = posterior.summary()
            m, c = s["mu"]["mean"], s["sigma"]["mean"]
            lr = (m - self.k * c, m + self.k * c)
        self.seen.append(lr)
        return lr


def test_a_new_policy_drives_the_online_loop():
    policy = PosteriorBand()
    run = run_online(family_population("normal", (3.0, 2.0), 80, 2.0, seed=5), policy, 80,
                     n_particles=300, seed=6)
    np.testing.assert_array_equal(np.column_stack([run.l, run.r]), np.array(policy.seen))
    assert (run.l < run.r).all() and run.l[0] == -10.0
    # the band follows the posterior towards the truth (mu = 3)
    assert abs(0.5 * (run.l[-1] + run.r[-1]) - 3.0) < 2.0


# --------------------------------------------------------------------- a backend
@pytest.mark.slow
def test_a_new_backend_is_chosen_by_the_public_entry_point():
    calls = []

    def logistic_posterior(y, l, r, eps, **kw):
        calls.append(len(y))
        return exact_posterior(y, l, r, eps, family=Logistic(), generic=True, **kw)

    y, l, r = np.array([0.3, -0.4, 1.2]), np.full(3, -2.0), np.full(3, 2.0)
    plain = exact_posterior(y, l, r, 2.0, family=Logistic(), grid=(30, 30))
    backends.register("posterior", Logistic, LaplaceMechanism, logistic_posterior)
    try:
        via = exact_posterior(y, l, r, 2.0, family=Logistic(), grid=(30, 30))
        assert calls == [3]
        np.testing.assert_array_equal(via.log_post, plain.log_post)
        # matched exactly: another family, or another mechanism, is not affected
        exact_posterior(y, l, r, 2.0, family="laplace", grid=(20, 20))
        exact_posterior(y, l, r, 2.0, family=Logistic(), mechanism="gaussian", grid=(20, 20))
        assert calls == [3]
    finally:
        backends.unregister("posterior", Logistic, LaplaceMechanism)
    exact_posterior(y, l, r, 2.0, family=Logistic(), grid=(30, 30))
    assert calls == [3]


def test_check_family_passes_a_right_family_and_fails_a_wrong_score():
    """dpbook.model.checks.check_family: the logistic passes every self-check; the same
    family with its score's sign flipped fails one."""
    assert check_family(Logistic(), rng=0)["passed"].all()

    class WrongScore(Logistic):
        def base_dlogpdf(self, z):
            return -super().base_dlogpdf(z)

    assert not check_family(WrongScore(), rng=0)["passed"].all()
