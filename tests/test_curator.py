"""The two sides of Algorithm 1 apart (issue 25, item 3): the curator (intervals out,
releases in, the posterior; saved and resumed) and the individual (one value, one
interval, eps -> one release), with the seeded sampler for simulation and OpenDP's for
deployment."""

import json

import numpy as np
import pytest
from scipy import stats

from dpbook.cli import main
from dpbook.online import MarginalSMC, run_online
from dpbook.online.curator_state import load_curator, save_curator
from dpbook.online.streams import make_curator, quartiles, run_stream
from dpbook.privacy.curator import Curator
from dpbook.privacy.individual import private_release, seeded_release_for_simulation
from dpbook.privacy.policies import AdaptivePolicy, FixedPolicy
from dpbook.privacy.population import Population, normal_population


def test_apart_is_run_online(tmp_path):
    """The curator in one 'process' (its state only through a file between releases),
    the individuals in another (only (l, r, eps) in, y out): the releases and the
    posterior of run_online with the same seeds, bit for bit."""
    n, eps, seed = 40, 2.0, 11
    run = run_online(normal_population(n, 1.0, 2.0, eps, seed=5), AdaptivePolicy(-2.0, 2.0),
                     n, seed=seed, posterior=MarginalSMC(eps, n_particles=200, seed=3))
    # the same seeds, taken apart: run_online spawns (its SMC's, the policy's) from its
    # seed and normal_population (values, noise) from its own
    policy_ss = np.random.SeedSequence(seed).spawn(2)[1]
    data_ss, noise_ss = np.random.SeedSequence(5).spawn(2)
    x = np.random.default_rng(data_ss).normal(1.0, 2.0, size=n)
    noise = np.random.default_rng(noise_ss)
    state = tmp_path / "curator.db"
    save_curator(Curator(MarginalSMC(eps, n_particles=200, seed=3), AdaptivePolicy(-2.0, 2.0),
                         np.random.default_rng(policy_ss)), state)
    for t in range(n):
        curator = load_curator(state)
        l, r = curator.next_interval()
        save_curator(curator, state)
        y = seeded_release_for_simulation(float(x[t]), l, r, eps, noise)  # the individual
        curator = load_curator(state)
        curator.take(y, l, r)
        save_curator(curator, state)
    curator = load_curator(state)
    y, l, r = curator.releases()
    assert np.array_equal(y, run.y) and np.array_equal(l, run.l) and np.array_equal(r, run.r)
    assert np.array_equal(curator.posterior.theta, run.smc.theta)
    assert quartiles(curator.posterior) == quartiles(run.smc)
    assert curator.n == n and not curator.outstanding


@pytest.mark.parametrize("method", ["smc-marginal", "online-gradient"])
def test_apart_is_run_stream(method, tmp_path):
    """make_curator with run_stream's seed: the same releases and final quartiles;
    saved and resumed at t = 25."""
    values = np.random.default_rng(2).standard_t(3, 60) * 5 + 40
    eps, seed = 1.0, 7
    run, summary = run_stream(values, eps, method=method, n_particles=300, seed=seed,
                              shuffle=True)
    order_ss, noise_ss, algo_ss = np.random.SeedSequence(seed).spawn(3)
    x = values[np.random.default_rng(order_ss).permutation(values.size)]
    noise = np.random.default_rng(noise_ss)
    curator = make_curator(eps, method, n_particles=300, seed=algo_ss)
    for t, xt in enumerate(x):
        if t == 25:
            save_curator(curator, tmp_path / "c.db")
            del curator
            curator = load_curator(tmp_path / "c.db")
        l, r = curator.next_interval()
        curator.take(seeded_release_for_simulation(float(xt), l, r, eps, noise), l, r)
    y, l, r = curator.releases()
    assert np.array_equal(y, run.y) and np.array_equal(l, run.l)
    assert quartiles(curator.posterior) == summary["quartiles"]


def test_batches_out_of_order_and_refusals():
    curator = make_curator(2.0, "smc-marginal", n_particles=100, seed=0)
    first = curator.publish(3)
    second = curator.publish(2)
    assert first != second and curator.outstanding == {first: 3, second: 2}
    rng = np.random.default_rng(0)
    for l, r in (second, first, first, second):
        curator.take(seeded_release_for_simulation(0.3, l, r, 2.0, rng), l, r)
    assert curator.outstanding == {first: 1} and curator.n == 4
    assert curator.posterior.t == 4
    with pytest.raises(ValueError, match="not published"):  # the batch of 2 is done
        curator.take(0.0, *second)
    with pytest.raises(ValueError, match="not published"):
        curator.take(0.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="fewer than 2"):
        curator.withdraw(*first, k=2)
    curator.withdraw(*first)
    assert not curator.outstanding and curator.n == 4
    with pytest.raises(ValueError, match="y must be"):
        curator.take(float("nan"), *first)
    with pytest.raises(ValueError, match="k must"):
        curator.publish(0)


def test_a_curator_needs_a_posterior():
    with pytest.raises(ValueError, match="needs a method update"):
        Curator(object(), FixedPolicy(0, 1))


def test_private_release_is_laplace_around_the_clipped_value():
    """OpenDP's noise: not reproducible, centred at T(x) = 3 (not x = 7), Laplace of
    scale (r - l)/eps = 2: KS test, and the mean |Y - 3| within 5 standard errors (0.032
    with 4000 draws) of 2, which a scale off by 10% fails."""
    draws = np.array([private_release(7.0, -1.0, 3.0, 2.0) for _ in range(4000)])
    assert len(set(draws.tolist())) == draws.size  # fresh entropy every call
    assert stats.kstest(draws, stats.laplace(loc=3.0, scale=2.0).cdf).pvalue > 1e-3
    assert abs(np.abs(draws - 3.0).mean() - 2.0) < 5 * 2.0 / np.sqrt(draws.size)
    g = np.array([private_release(0.5, 0.0, 1.0, 1.0, "gaussian") for _ in range(2000)])
    assert stats.kstest(g, stats.norm(loc=0.5, scale=1.0).cdf).pvalue > 1e-3


@pytest.mark.parametrize("args, msg", [
    ((float("nan"), 0.0, 1.0, 1.0), "x must be"),
    ((0.0, 1.0, 0.0, 1.0), "l < r"),
    ((0.0, 0.0, 1.0, 0.0), "eps"),
])
def test_private_release_refuses(args, msg):
    with pytest.raises(ValueError, match=msg):
        private_release(*args)


def test_deployed_population_and_stream(tmp_path, capsys):
    pop = Population([1.0, 2.0, 3.0], 1.0, None)
    ys = [pop.release(0.0, 4.0) for _ in range(3)]
    assert len(set(ys)) == 3 and all(np.isfinite(ys))
    with pytest.raises(ValueError, match="Generator"):
        Population([1.0], 1.0, 5)
    path = tmp_path / "v.csv"
    path.write_text("v\n" + "".join(f"{v}\n" for v in np.linspace(40, 60, 50)))
    outs = []
    for _ in range(2):
        assert main(["stream", str(path), "--column", "v", "--eps", "2", "--deploy",
                     "--particles", "100", "--range", "30", "70", "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0]["noise"] == "opendp" and outs[0]["posterior"] != outs[1]["posterior"]


@pytest.mark.slow
def test_release_limit_is_the_moments_for_normal_values_and_not_for_heavy_tails():
    """Normal values through a wide interval: the KL limit is their mean and sd (within
    their own sampling error); Student-t(3) values: sigma* is not their sd, and the
    adaptive fixed point's sigma is smaller still (narrow intervals see the peak)."""
    from dpbook.online.streams import adaptive_limit, release_limit

    z = np.random.default_rng(0).normal(5.0, 2.0, 20_000)
    mu, sigma = release_limit(z, -20.0, 30.0, 1.0)
    assert abs(mu - z.mean()) < 0.02 and abs(sigma - z.std()) < 0.02
    mu, sigma = adaptive_limit(z, -1.5, 1.5, 1.0)
    assert abs(mu - 5.0) < 0.05 and abs(sigma - 2.0) < 0.05
    t = np.random.default_rng(1).standard_t(3, 20_000)
    mu, sigma = release_limit(t, -50.0, 50.0, 2.0)
    assert abs(mu - t.mean()) < 0.05 and sigma < 0.9 * t.std()
    mu_a, sigma_a = adaptive_limit(t, -0.5, 0.5, 2.0)
    assert abs(mu_a) < 0.05 and sigma_a < 0.9 * sigma
    with pytest.raises(ValueError, match="no values"):
        release_limit([], 0.0, 1.0, 1.0)
