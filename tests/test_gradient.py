"""The online gradient method (dpbook.online.gradient, Section 7's alternative to SMC)."""

import math

import numpy as np
import pytest

from dpbook.online import OnlineGradient, run_online
from dpbook.online.gradient import d_optimal_symmetric
from dpbook.privacy.policies import AdaptivePolicy
from dpbook.privacy.population import normal_population


@pytest.mark.slow
def test_converges_on_a_long_stream():
    # eps = 5, n = 5000 from N(50, 10), started at the prior median (0, 1.2).  An
    # efficient estimate of mu has sd sigma / sqrt(F0_mumu n) = 0.06 here (F0_mumu = 0.57
    # at the default interval): 0.3 is 5 sd.  The estimate of sigma still carries the
    # transient of its early overshoot (1/t steps forget slowly): 25% is a loose bound.
    eps, n = 5.0, 5000
    g = OnlineGradient(eps)
    run_online(normal_population(n, 50.0, 10**0.5, eps, seed=1), AdaptivePolicy(g.a, g.b),
               n, posterior=g, seed=3)
    m, c = g.theta
    assert abs(m - 50.0) < 0.3 and abs(c / math.sqrt(10.0) - 1.0) < 0.25, (m, c)
    assert len(g.history.mean_mu) == n


def test_default_interval_is_symmetric_and_informative_for_both():
    # against the F_mumu-optimal interval of eq. (13), [-0.06, 0.06] at eps = 1: far more
    # information about sigma, so a larger determinant
    from dpbook.fisher import best_interval, fisher_information

    a, b = d_optimal_symmetric(1.0)
    best = best_interval(1.0, method="exact")
    F, F13 = (fisher_information(lo, hi, 1.0).F for lo, hi in [(a, b),
                                                              (best["a"], best["b"])])
    assert a == -b and F[1, 1] > 10 * F13[1, 1]
    assert np.linalg.det(F) > np.linalg.det(F13)


@pytest.mark.parametrize("kwargs, needle", [
    (dict(t0=0.0), "t0"), (dict(t0=-1.0), "t0"), (dict(a=1.0, b=0.5), "a"),
    (dict(family="poisson"), "location-scale"), (dict(eps=0.0), "eps"),
    (dict(theta0=(0.0, -1.0)), "sigma"),
])
def test_bad_parameters(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        OnlineGradient(**(dict(eps=1.0) | kwargs))


def test_same_input_same_estimate():
    y = np.array([0.3, -0.2, 1.5, 0.1])
    runs = []
    for _ in range(2):
        g = OnlineGradient(2.0, -1.0, 1.0, theta0=(0.0, 1.0))
        for v in y:
            m, c = g.theta
            g.update(v, m - c, m + c)
        runs.append(g.theta)
    assert runs[0] == runs[1]


def test_experiment_refuses_online_gradient_for_other_families(tmp_path):
    from dpbook.experiment import run_experiment

    with pytest.raises(ValueError, match="location-scale"):
        run_experiment(family="poisson", theta=(10.0,), methods=["online-gradient"],
                       out=tmp_path, progress=False)
    assert not (tmp_path / "tasks").exists()


def test_compiled_score_matches_fishers_identity():
    # the closed form's derivatives against the log-space Fisher-identity score
    from dpbook.likelihood.normal_laplace import _score_normal_laplace, score

    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(3000):
        l = rng.normal(0, 3)
        r = l + rng.exponential(3) + 1e-3
        eps, m, s = rng.choice([0.3, 1, 5, 30]), rng.normal(0, 4), rng.exponential(2) + 0.01
        y = rng.uniform(l - 5, r + 5)
        ok, g_m, g_s = _score_normal_laplace(y, l, r, (r - l) / eps, m, s)
        if ok:
            ref = score(y, l, r, eps, m, s)
            assert np.allclose([g_m, g_s], ref, rtol=1e-7, atol=1e-12), (y, l, r, eps, m, s)
            checked += 1
    assert checked > 2000


@pytest.mark.slow
def test_posterior_cli_online_gradient(write_csv, capsys):
    import json

    from dpbook.cli import main
    from dpbook.privacy.population import normal_population

    pop = normal_population(2000, 1.0, 2.0, 5.0, seed=1)
    rows = [(pop.release(-4.0, 6.0), -4.0, 6.0) for _ in range(2000)]
    path = write_csv("y,l,r\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    assert main(["posterior", "--method", "online-gradient", "--eps", "5", "--json",
                 path]) == 0
    out = json.loads(capsys.readouterr().out)
    # an efficient estimate is within a few posterior sd of the posterior median (the
    # sd from the interquartile range, normal approximation)
    from dpbook.posterior import exact_posterior

    y, l, r = (np.array(v) for v in zip(*rows))
    q = exact_posterior(y, l, r, 5.0).quantile([0.25, 0.5, 0.75])
    for j, p in enumerate(("mu", "sigma")):
        sd = (q[2, j] - q[0, j]) / 1.349
        assert abs(out["estimate"][p] - q[1, j]) < 3 * sd, (p, out["estimate"], q[:, j])
    assert main(["posterior", "--method", "online-gradient", "--eps", "5", path]) == 0
    assert "no credible interval" in capsys.readouterr().out
    # a family that is not location-scale: one line, exit 2
    assert main(["posterior", "--method", "online-gradient", "--family", "poisson",
                 "--eps", "5", path]) == 2
    assert "location-scale" in capsys.readouterr().err
